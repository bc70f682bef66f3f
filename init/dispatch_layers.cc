// init/dispatch_layers.cc: InstallDispatchLayers, the composition root of the dispatch layers
// (dispatch_layers.h).
#include "init/dispatch_layers.h"

#include <mutex>

#include "aot/functionalize.h"
#include "autograd/derivatives.h"
#include "fx/symbolic_context.h"
#include "fx/tracer.h"
#include "tensor/dispatcher.h"

namespace kiln {

void InstallDispatchLayers() {
  static std::once_flag once;
  std::call_once(once, [] {
    Registry::Get();               // builtin ops and their backend kernels, Fake/Meta fallbacks, autocast
    InstallDynamicShapeKernels();  // Meta/Fake kernels minting unbacked symbols (nonzero, item)
    autograd::InstallAutograd();   // the Autograd kernel and every derivative formula
    fx::InstallTracer();           // make_fx's Tracing fallback and the composites it records whole
    aot::InstallFunctionalize();   // functionalization, topmost
  });
}

}  // namespace kiln
