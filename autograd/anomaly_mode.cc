// autograd/anomaly_mode.cc: the anomaly-detection flags and hooks (anomaly_mode.h).
#include "autograd/anomaly_mode.h"

#include <atomic>

namespace kiln::autograd {
namespace {

std::atomic<bool> g_enabled{false};
std::atomic<bool> g_check_nan{true};

struct Hooks {
  std::function<void(Node&)> capture, report;
};
Hooks& TheHooks() {
  static Hooks* hooks = new Hooks();
  return *hooks;
}

}  // namespace

bool AnomalyMode::is_enabled() { return g_enabled.load(std::memory_order_relaxed); }
bool AnomalyMode::should_check_nan() { return g_check_nan.load(std::memory_order_relaxed); }
void AnomalyMode::set_enabled(bool enabled, bool check_nan) {
  g_enabled = enabled;
  g_check_nan = check_nan;
}

void SetAnomalyHooks(std::function<void(Node&)> capture, std::function<void(Node&)> report) {
  TheHooks() = Hooks{std::move(capture), std::move(report)};
}

void CaptureForwardStack(Node& node) {
  if (AnomalyMode::is_enabled() && TheHooks().capture) TheHooks().capture(node);
}

void ReportBackwardError(Node& node) {
  if (AnomalyMode::is_enabled() && TheHooks().report) TheHooks().report(node);
}

}  // namespace kiln::autograd
