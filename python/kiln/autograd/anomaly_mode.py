"""kiln.autograd.detect_anomaly and set_detect_anomaly: PyTorch's anomaly detection.

While on, every node autograd records keeps the forward's traceback in its metadata
(`grad_fn.metadata["traceback_"]`, as PyTorch keeps it); a backward node that raises is reported
by a warning naming it, with that traceback ("Error detected in LogBackward0. Traceback of forward
call that caused the error: ..."), and with check_nan a node whose gradient holds NaN raises
"Function 'LogBackward0' returned nan values in its 0th output." (autograd/anomaly_mode.h runs the
checks; this module captures and reports the Python side).
"""

import os
import traceback
import warnings

from kiln import _C

_KILN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _capture(node):
    meta = node.metadata
    if "traceback_" not in meta:  # a node with several outputs is set once per output
        frames = [f for f in traceback.extract_stack()[:-1] if not f.filename.startswith(_KILN_DIR)]
        meta["traceback_"] = traceback.format_list(frames)


def _report(node):
    stack = "".join(node.metadata.get("traceback_", ()))
    warnings.warn(f"Error detected in {node.name()}. Traceback of forward call that caused the error:\n{stack}",
                  stacklevel=2)


_C._set_anomaly_hooks(_capture, _report)


class detect_anomaly:
    """Context manager (and decorator) turning anomaly detection on, with a NaN check of every
    backward node's gradients unless check_nan=False; it costs time, as PyTorch warns."""

    def __init__(self, check_nan=True):
        self.prev = _C._is_anomaly_enabled()
        self.check_nan = check_nan
        self.prev_check_nan = _C._is_anomaly_check_nan_enabled()
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", stacklevel=2)

    def __enter__(self):
        _C._set_anomaly_enabled(True, self.check_nan)

    def __exit__(self, *args):
        _C._set_anomaly_enabled(self.prev, self.prev_check_nan)

    def __call__(self, fn):
        def wrapped(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)
        return wrapped


class set_detect_anomaly:
    """Sets anomaly detection on or off: at once (a function call), or for a `with` block."""

    def __init__(self, mode, check_nan=True):
        self.prev = _C._is_anomaly_enabled()
        self.prev_check_nan = _C._is_anomaly_check_nan_enabled()
        _C._set_anomaly_enabled(bool(mode), bool(check_nan))

    def __enter__(self):
        pass

    def __exit__(self, *args):
        _C._set_anomaly_enabled(self.prev, self.prev_check_nan)
