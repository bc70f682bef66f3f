"""kiln._dynamo.logs: the former home of KILN_LOGS, kept so `from kiln._dynamo import logs` works.

Logging lives in kiln._logging (below every stage that logs). These are the old helpers over it:
enabled(name) and log(name, message) for an artifact or a log's name, set_logs as kiln._logging's.
"""

import logging

from kiln._logging import _internal
from kiln._logging._internal import set_logs  # noqa: F401


def enabled_set():
    """The artifacts named by the current setting."""
    return set(_internal.log_state.artifact_names)


def enabled(name):
    """Whether a message of `name` (an artifact, or a log such as `dynamo`) would be printed."""
    if _internal.log_registry.is_artifact(name):
        if name in _internal.log_registry.off_by_default_artifact_names:
            return _internal.artifact_enabled(name)
        return _internal.getArtifactLogger("kiln._dynamo", name).isEnabledFor(logging.DEBUG)
    qnames = _internal.log_registry.log_alias_to_log_qnames.get(name)
    if qnames is None:
        return False
    return logging.getLogger(qnames[0]).isEnabledFor(logging.INFO)


def log(name, message):
    """Writes `message` as artifact `name`, or at INFO on the log `name`."""
    if _internal.log_registry.is_artifact(name):
        _internal.getArtifactLogger("kiln._dynamo", name).debug("%s", message)
    elif name in _internal.log_registry.log_alias_to_log_qnames:
        logging.getLogger(_internal.log_registry.log_alias_to_log_qnames[name][0]).info("%s", message)
    else:
        raise ValueError(f"kiln._dynamo.logs.log: unknown log or artifact {name!r}; valid: "
                         f"{', '.join(_internal.log_registry.valid_names())}")
