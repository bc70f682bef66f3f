// tensor/autocast.h: automatic mixed precision (kiln.autocast), as a dispatch layer.
//
// Note [Autocast]: while autocast is on, the thread's included keys hold DispatchKey::Autocast,
// which sits above Autograd, so its casts are recorded by autograd (the gradient flows back
// through them to float32 parameters) and by make_fx's tracer (compiled code casts where eager
// does). A layer-wide fallback kernel looks the op up in PyTorch's CPU policy (autocast.cc):
//   - lower precision (mm, addmm, bmm, baddbmm, matmul, linear, convolutions, sdpa, prelu):
//     float32 tensor arguments are cast to the autocast dtype (bfloat16 by default);
//   - float32 (losses, prod, cdist, trace, the linalg factorizations, ...): 16-bit float
//     arguments are cast to float32;
//   - promote (cat, stack, index_copy): 16-bit arguments are cast to float32 when any argument
//     is float32 (PyTorch's prioritize);
// float64 arguments are never cast. A listed op then runs with Autocast excluded, so its parts
// (linear's addmm, cross_entropy's log_softmax) keep the precision the policy chose. An unlisted
// op passes down, and the parts of an unlisted composite (einsum's bmm) are autocast in turn.
// The Autocast slot prefers this fallback over an op's composite kernel, so a composite in a list
// is cast as a whole, as PyTorch's autocast kernels wrap the composite op.
#pragma once

#include "tensor/dispatcher.h"
#include "tensor/scalar_type.h"

namespace kiln {

struct AutocastState {
  bool enabled = false;
  ScalarType dtype = ScalarType::BFloat16;  // PyTorch's CPU default
};

// The thread's autocast state; SetAutocast also adds or removes the Autocast key.
const AutocastState& TlsAutocast();
void SetAutocast(bool enabled, ScalarType dtype);

// Registers the Autocast fallback (called once when the registry is built).
void InstallAutocast(Registry& r);

}  // namespace kiln
