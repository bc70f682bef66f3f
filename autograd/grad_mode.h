// autograd/grad_mode.h: whether ops record a backward graph on this thread.
//
// Grad mode is a thread-local flag. Turning it off removes the Autograd key from the thread's
// dispatch key set (Note [Dispatch key order]), so under `no_grad` an op never reaches the
// autograd kernel and costs nothing extra. Inference mode is grad mode off plus a flag that
// marks the tensors made under it, which can later not be saved for backward.
#pragma once

namespace kiln::autograd {

struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};

// Sets grad mode for a scope and restores it on exit.
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : prev_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
  ~AutoGradMode() { GradMode::set_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};

struct InferenceMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);  // also turns grad mode off/on
};

}  // namespace kiln::autograd
