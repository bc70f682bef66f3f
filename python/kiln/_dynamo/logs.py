"""kiln._dynamo.logs: KILN_LOGS, as TORCH_LOGS (`KILN_LOGS=graph_breaks,guards,recompiles`).

Artifacts: dynamo (what is compiled), graph_breaks, graph_code, guards, recompiles, aot_graphs,
output_code. `+dynamo` is accepted for PyTorch's verbose spelling. Output goes to stderr through
the `kiln._dynamo` logger.
"""

import logging
import os

_logger = logging.getLogger("kiln._dynamo")
_enabled = None


def _parse():
    names = set()
    for part in os.environ.get("KILN_LOGS", "").split(","):
        part = part.strip().lstrip("+")
        if part:
            names.add(part)
    return names


def _ensure_handler():
    if not _logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[kiln] %(message)s"))
        _logger.addHandler(handler)
        _logger.setLevel(logging.INFO)
        _logger.propagate = False


def set_logs(**artifacts):
    """Switches artifacts on or off from Python: set_logs(graph_breaks=True, guards=False)."""
    on = enabled_set()
    for name, value in artifacts.items():
        (on.add if value else on.discard)(name)


def enabled_set():
    global _enabled
    if _enabled is None:
        _enabled = _parse()
    return _enabled


def enabled(name):
    return name in enabled_set()


def log(name, message):
    if name in enabled_set():
        _ensure_handler()
        _logger.info("[%s] %s", name, message)
