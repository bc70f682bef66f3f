// autograd/grad_mode.cc: the thread-local grad and inference mode flags.
#include "autograd/grad_mode.h"

#include "tensor/dispatch_key.h"

namespace kiln::autograd {
namespace {
thread_local bool tls_inference_mode = false;
}  // namespace

bool GradMode::is_enabled() { return !TlsLocalDispatchKeySet().excluded.has(DispatchKey::Autograd); }

void GradMode::set_enabled(bool enabled) {
  LocalDispatchKeySet& tls = TlsLocalDispatchKeySet();
  tls.excluded = enabled ? tls.excluded.remove(DispatchKey::Autograd) : tls.excluded.add(DispatchKey::Autograd);
}

bool InferenceMode::is_enabled() { return tls_inference_mode; }
void InferenceMode::set_enabled(bool enabled) { tls_inference_mode = enabled; }

}  // namespace kiln::autograd
