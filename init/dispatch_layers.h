// init/dispatch_layers.h: the one place that installs kiln's dispatch layers (DESIGN.md §3,
// "Dispatch keys, highest first: Functionalize -> Autograd -> Tracing -> Fake/Meta -> backend").
//
// Each layer's package offers an idempotent Install function and knows nothing of the others; the
// order they are installed in is decided here, bottom up, so a layer that looks at the kernels
// below it (Tracing marks the composites it records; Functionalize the functional variants of
// mutating ops) finds them. The Python module (python/csrc/module.cc) calls InstallDispatchLayers()
// first thing at import; C++ tests call it, or the one layer they test.
#pragma once

namespace kiln {

// Installs, once and in this order: the registry's builtin ops with their backend kernels, the
// Fake/Meta fallbacks and autocast (Registry::Get); the dynamic-shape kernels (fx/); the Autograd
// layer (autograd/); the Tracing layer of make_fx (fx/); the Functionalize layer (aot/).
// Idempotent and thread-safe.
void InstallDispatchLayers();

}  // namespace kiln
