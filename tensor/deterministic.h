// tensor/deterministic.h: torch.use_deterministic_algorithms for the C++ kernels. Every CPU kernel
// is deterministic; the CUDA kernels that add floats with atomics (index_add_, scatter_add and
// index_put_ with accumulate=True) are not, and call AlertNotDeterministic first, which raises
// PyTorch's RuntimeError when the mode is on, or warns (warn_only=True), as at::globalContext()'s
// alertNotDeterministic does.
#pragma once

#include <string>

namespace kiln {

void SetDeterministicAlgorithms(bool enabled, bool warn_only);
bool DeterministicAlgorithms();

// `caller` as PyTorch names it ("index_add_cuda_").
void AlertNotDeterministic(const std::string& caller);

// Where warnings from C++ go: the Python module installs one that raises a UserWarning; without it,
// stderr.
using WarningHandler = void (*)(const std::string& message);
void SetWarningHandler(WarningHandler handler);
void Warn(const std::string& message);

}  // namespace kiln
