// autograd/grad_mode.cc: the thread-local grad and inference mode flags.
#include "autograd/grad_mode.h"

#include "tensor/dispatch_key.h"

namespace kiln::autograd {
namespace {
thread_local bool tls_inference_mode = false;
}  // namespace

bool GradMode::is_enabled() {
  return !tls_inference_mode && !TlsLocalDispatchKeySet().excluded.has(DispatchKey::Autograd);
}

void GradMode::set_enabled(bool enabled) {
  if (tls_inference_mode) return;  // grad mode stays off, and ops keep reaching the marking kernel
  LocalDispatchKeySet& tls = TlsLocalDispatchKeySet();
  tls.excluded = enabled ? tls.excluded.remove(DispatchKey::Autograd) : tls.excluded.add(DispatchKey::Autograd);
}

// Note [Inference tensors]: inference mode must mark every tensor made under it, so (unlike
// no_grad) it sends every op to the Autograd kernel: the key is included for the thread and not
// excluded. The kernel runs the op below autograd and marks its new outputs (derivatives.cc,
// MarkInference); grad mode reads as off. Leaving it restores whatever grad mode then sets.
bool InferenceMode::is_enabled() { return tls_inference_mode; }
void InferenceMode::set_enabled(bool enabled) {
  LocalDispatchKeySet& tls = TlsLocalDispatchKeySet();
  if (enabled && !tls_inference_mode) {
    tls.included = tls.included.add(DispatchKey::Autograd);
    tls.excluded = tls.excluded.remove(DispatchKey::Autograd);
  } else if (!enabled && tls_inference_mode) {
    tls.included = tls.included.remove(DispatchKey::Autograd);
  }
  tls_inference_mode = enabled;
}

}  // namespace kiln::autograd
