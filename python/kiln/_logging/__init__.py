"""kiln._logging: KILN_LOGS and set_logs, as torch._logging (TORCH_LOGS).

    KILN_LOGS=help python train.py                    # every name, with what it shows (a ValueError)
    KILN_LOGS="+dynamo,graph_breaks,recompiles" python train.py
    kiln._logging.set_logs(dynamo=logging.DEBUG, graph_breaks=True)

A module that logs an artifact writes through getArtifactLogger(__name__, "graph_breaks").debug(...)
and its ordinary messages through logging.getLogger(__name__); names are registered in
_registrations.py, and _internal.py holds the parsing and the handlers (its banner says how).
"""

from kiln._logging import _registrations  # noqa: F401  (every name, before the setting is read)
from kiln._logging._internal import (  # noqa: F401
    DEFAULT_LOGGING, _init_logs, getArtifactLogger, set_logs,
)

__all__ = ["DEFAULT_LOGGING", "getArtifactLogger", "set_logs"]
