// autograd/anomaly_mode.h: PyTorch's anomaly detection (torch.autograd.detect_anomaly).
//
// While it is on, each new node of the graph gets the forward's Python traceback (the capture
// hook, installed by python/: it stores `traceback_` in the node's metadata, as PyTorch does),
// a backward node that raises is reported with that traceback before the error propagates, and
// with check_nan a node whose gradient holds NaN raises "Function 'LogBackward0' returned nan
// values in its 0th output." The flags are process-wide, as PyTorch's are.
#pragma once

#include <functional>

#include "autograd/node.h"

namespace kiln::autograd {

struct AnomalyMode {
  static bool is_enabled();
  static bool should_check_nan();
  static void set_enabled(bool enabled, bool check_nan = true);
};

// capture(node) at a node's creation; report(node) when its backward raised.
void SetAnomalyHooks(std::function<void(Node&)> capture, std::function<void(Node&)> report);
void CaptureForwardStack(Node& node);   // no-op unless anomaly mode is on
void ReportBackwardError(Node& node);

}  // namespace kiln::autograd
