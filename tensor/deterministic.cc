// tensor/deterministic.cc: the deterministic-algorithms mode and the C++ warning hook.
#include "tensor/deterministic.h"

#include <atomic>
#include <cstdio>

#include "runtime/error.h"

namespace kiln {
namespace {

std::atomic<bool> g_enabled{false};
std::atomic<bool> g_warn_only{false};
std::atomic<WarningHandler> g_handler{nullptr};

}  // namespace

void SetDeterministicAlgorithms(bool enabled, bool warn_only) {
  g_enabled = enabled;
  g_warn_only = warn_only;
}
bool DeterministicAlgorithms() { return g_enabled; }

void AlertNotDeterministic(const std::string& caller) {
  if (!g_enabled) return;
  const std::string message =
      caller + " does not have a deterministic implementation, but you set 'torch.use_deterministic_algorithms(True)'. "
      "You can turn off determinism just for this operation, or you can use the 'warn_only=True' option, if that's "
      "acceptable for your application.";
  if (g_warn_only) {
    Warn(message);
    return;
  }
  throw Error(message);
}

void SetWarningHandler(WarningHandler handler) { g_handler = handler; }

void Warn(const std::string& message) {
  if (WarningHandler h = g_handler.load()) return h(message);
  std::fprintf(stderr, "UserWarning: %s\n", message.c_str());
}

}  // namespace kiln
