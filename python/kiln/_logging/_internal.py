"""kiln._logging._internal: KILN_LOGS and set_logs, as torch._logging._internal (TORCH_LOGS).

Two kinds of names, as in PyTorch:
- a *log* (a component: `dynamo`, `aot`, `inductor`, `all`) names Python loggers (`kiln._dynamo`)
  whose level the setting chooses: `dynamo` is INFO, `+dynamo` DEBUG, `-dynamo` ERROR; unnamed
  components stay at WARNING. A kiln module name (`+kiln._dynamo.guards`) works like a log.
- an *artifact* (`graph_breaks`, `guards`, `recompiles`, ...) is one kind of message, written at
  DEBUG on a logger `<module>.__<artifact>` (getArtifactLogger). Named, it is on whatever its
  component's level; unnamed, it shows when its component is at DEBUG, unless it is off by default
  (`output_code`, `bytecode`: too long to come with `+dynamo`).

Each registered log gets a stderr handler (and a file one for KILN_LOGS_OUT) and does not propagate
to the root logger, so a program's own logging setup neither doubles nor swallows kiln's lines.
The environment is read once, when kiln is imported (_init_logs); an unknown name raises ValueError
there, naming it and listing the valid ones. Nothing here imports the rest of kiln: every stage
that logs imports this module, never the other way round.
"""

import itertools
import logging
import os
import re
import sys
import weakref

from kiln._guards import current_compile_id

LOG_ENV_VAR = "KILN_LOGS"
LOG_OUT_ENV_VAR = "KILN_LOGS_OUT"
LOG_FORMAT_ENV_VAR = "KILN_LOGS_FORMAT"
_KILN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LEVELS = {logging.CRITICAL: "CRITICAL", logging.ERROR: "ERROR", logging.WARNING: "WARNING",
           logging.INFO: "INFO", logging.DEBUG: "DEBUG", logging.NOTSET: "NOTSET"}
_NAME = re.compile(r"[+-]?[\w.]+")

log = logging.getLogger(__name__)


class LogRegistry:
    """What can be named: logs (alias -> logger names), artifacts (name -> description), and the
    loggers made for them, so that a new setting can reset every one."""

    def __init__(self):
        self.log_alias_to_log_qnames = {}
        self.log_descriptions = {}
        self.artifact_names = set()
        self.artifact_descriptions = {}
        self.off_by_default_artifact_names = set()
        self.artifact_log_qnames = set()
        self.child_log_qnames = set()  # modules named in a setting below a registered log

    def is_artifact(self, name):
        return name in self.artifact_names

    def is_log(self, alias):
        return alias in self.log_alias_to_log_qnames

    def get_log_qnames(self):
        return set(itertools.chain.from_iterable(self.log_alias_to_log_qnames.values()))

    def valid_names(self):
        return sorted({"all"} | set(self.log_alias_to_log_qnames) | self.artifact_names)


class LogState:
    """What the current setting asks for: a level per logger name, and the artifacts named."""

    def __init__(self):
        self.log_qname_to_level = {}
        self.artifact_names = set()

    def enable_log(self, log_qnames, level):
        for qname in [log_qnames] if isinstance(log_qnames, str) else log_qnames:
            self.log_qname_to_level[qname] = level

    def enable_artifact(self, name):
        self.artifact_names.add(name)

    def is_artifact_enabled(self, name):
        return name in self.artifact_names


log_registry = LogRegistry()
log_state = LogState()

# torch._logging.DEFAULT_LOGGING's kiln counterpart: set_logs(**DEFAULT_LOGGING) shows what a
# compile does, why it breaks and why it recompiles.
DEFAULT_LOGGING = {
    "dynamo": logging.INFO,
    "aot": logging.INFO,
    "inductor": logging.INFO,
    "graph_breaks": True,
    "guards": True,
    "recompiles": True,
}


def register_log(setting_name, log_qnames, description=""):
    """Makes `setting_name` in KILN_LOGS and set_logs set the level of the loggers `log_qnames`."""
    log_registry.log_alias_to_log_qnames[setting_name] = [log_qnames] if isinstance(log_qnames, str) else list(log_qnames)
    log_registry.log_descriptions[setting_name] = description


def register_artifact(setting_name, description, off_by_default=False):
    """Makes `setting_name` an artifact: getArtifactLogger(__name__, setting_name) writes it."""
    log_registry.artifact_names.add(setting_name)
    log_registry.artifact_descriptions[setting_name] = description
    if off_by_default:
        log_registry.off_by_default_artifact_names.add(setting_name)


def getArtifactLogger(module_qname, artifact_name):
    """The logger for artifact `artifact_name` written from module `module_qname`: write with
    .debug(...); test .isEnabledFor(logging.DEBUG) before building a long message."""
    if artifact_name not in log_registry.artifact_names:
        raise ValueError(f"Artifact name: {artifact_name!r} not registered; register it in "
                         f"kiln/_logging/_registrations.py (registered: {', '.join(sorted(log_registry.artifact_names))})")
    qname = f"{module_qname}.__{artifact_name}"
    logger = logging.getLogger(qname)
    logger.artifact_name = artifact_name
    log_registry.artifact_log_qnames.add(qname)
    _configure_artifact_log(logger)
    return logger


def _configure_artifact_log(logger):
    # an artifact off by default reaches no handler through its component's DEBUG level
    if logger.artifact_name in log_registry.off_by_default_artifact_names:
        logger.propagate = False
    if log_state.is_artifact_enabled(logger.artifact_name):
        logger.setLevel(logging.DEBUG)
        logger.propagate = True


def artifact_enabled(name):
    """Whether artifact `name` was asked for by name (KILN_LOGS or set_logs)."""
    return log_state.is_artifact_enabled(name)


# --- the setting: KILN_LOGS="+dynamo,guards" ------------------------------------------------------
HELP_EXAMPLES = """
KILN_LOGS Info

Examples:
  KILN_LOGS="+dynamo,aot" will set the log level of kiln._dynamo to logging.DEBUG and of
  AOT autograd to logging.INFO

  KILN_LOGS="-dynamo,+inductor" will set the log level of kiln._dynamo to logging.ERROR and of
  kiln._inductor to logging.DEBUG

  KILN_LOGS="graph_breaks,recompiles" will enable the graph_breaks and recompiles artifacts

  KILN_LOGS="+kiln._dynamo.guards" will set the log level of that module to logging.DEBUG

  KILN_LOGS_FORMAT="%(levelname)s: %(message)s" or any logging format string sets the output
  format ("short" or "basic": logging.BASIC_FORMAT)

  KILN_LOGS_OUT=/tmp/output.txt will write the logs to /tmp/output.txt as well

  From Python: kiln._logging.set_logs(dynamo=logging.DEBUG, graph_breaks=True)
"""


def help_message(verbose=False):
    """What KILN_LOGS=help shows, as its ValueError's message (verbose: the same; kiln's list is
    short enough to show whole)."""
    width = max(len(n) for n in itertools.chain(log_registry.log_alias_to_log_qnames, log_registry.artifact_names))
    logs = [f"{'all':<{width}}  every kiln logger (the `kiln` logger and all below it)"]
    logs += [f"{alias:<{width}}  {log_registry.log_descriptions[alias]}"
             for alias in sorted(log_registry.log_alias_to_log_qnames) if alias != "kiln"]
    artifacts = [f"{name:<{width}}  {log_registry.artifact_descriptions[name]}"
                 + ("" if name not in log_registry.off_by_default_artifact_names else " (only when named)")
                 for name in sorted(log_registry.artifact_names)]
    return (HELP_EXAMPLES + "\nLogs (a level: name is INFO, +name DEBUG, -name ERROR)\n"
            + "".join(f"  {line}\n" for line in logs)
            + "\nArtifacts (on when named; also when their log is at DEBUG, unless only when named)\n"
            + "".join(f"  {line}\n" for line in artifacts))


def _invalid_settings_err_msg(settings, unknown):
    return f"""
Invalid log settings: {settings}, must be a comma separated list of registered log names, registered
artifact names or kiln module names (each optionally prefixed with + or -).
Unknown: {', '.join(repr(u) for u in unknown)}
For more info on various settings, try KILN_LOGS="help"
Valid settings:
{', '.join(log_registry.valid_names())}
"""


def _is_kiln_module(qname):
    """Whether `qname` names a kiln module or package, found on disk: importing it to ask would
    run kiln's subpackages while kiln itself is being imported."""
    parts = qname.split(".")
    if parts[0] != "kiln" or not all(p.isidentifier() for p in parts):
        return False
    path = os.path.join(_KILN_DIR, *parts[1:])
    return os.path.isfile(os.path.join(path, "__init__.py")) or os.path.isfile(path + ".py")


def _enable_module(state, qname, level):
    # below the registered `kiln` log, a module's records reach that log's handler
    log_registry.child_log_qnames.add(qname)
    state.enable_log(qname, level)


def _parse_log_settings(settings):
    """KILN_LOGS's text -> a LogState; ValueError naming every unknown name. `help` raises a
    ValueError whose message is the list of names, as TORCH_LOGS=help does (so `import kiln` shows
    it and stops)."""
    settings = settings.strip()
    state = LogState()
    if settings == "":
        return state
    if settings in ("help", "+help"):
        raise ValueError(help_message(verbose=settings == "+help"))
    parts = [p.strip() for p in settings.split(",")]
    resolved, unknown = [], []
    for part in parts:
        if not _NAME.fullmatch(part):
            unknown.append(part)
            continue
        level = {"+": logging.DEBUG, "-": logging.ERROR}.get(part[0], logging.INFO)
        name = part.lstrip("+-")
        if name == "all":
            name = "kiln"
        if log_registry.is_log(name) or log_registry.is_artifact(name) or _is_kiln_module(name):
            resolved.append((name, level))
        else:
            unknown.append(part)
    if unknown:
        raise ValueError(_invalid_settings_err_msg(settings, unknown))
    for name, level in resolved:
        if log_registry.is_log(name):
            state.enable_log(log_registry.log_alias_to_log_qnames[name], level)
        elif log_registry.is_artifact(name):
            state.enable_artifact(name)
        else:
            _enable_module(state, name, level)
    return state


def set_logs(*, all=None, dynamo=None, aot=None, inductor=None, bytecode=False, graph_breaks=False,
             graph_code=False, guards=False, recompiles=False, aot_graphs=False, output_code=False,
             perf_hints=False, modules=None, **others):
    """Sets the level of each log component and switches artifacts on, as torch._logging.set_logs.

    Components (`all`, `dynamo`, `aot`, `inductor`) take a logging level (logging.DEBUG, ...;
    None leaves the default, WARNING); artifacts take a bool. `modules` maps a kiln module name,
    or any of the names above, to its level or bool. Each call replaces the previous setting
    entirely; set_logs() goes back to the defaults. KILN_LOGS, when set, wins: the call is
    ignored with a warning, as PyTorch does.

        kiln._logging.set_logs(dynamo=logging.DEBUG, graph_breaks=True)
    """
    if others:
        raise TypeError(f"set_logs() got unknown name(s) {', '.join(sorted(others))}; valid names: "
                        f"{', '.join(n for n in log_registry.valid_names() if n != 'kiln')}, modules")
    if LOG_ENV_VAR in os.environ:
        log.warning("Using KILN_LOGS environment variable for log settings, ignoring call to set_logs")
        return
    state = LogState()
    settings = dict(kiln=all, dynamo=dynamo, aot=aot, inductor=inductor, bytecode=bytecode,
                    graph_breaks=graph_breaks, graph_code=graph_code, guards=guards, recompiles=recompiles,
                    aot_graphs=aot_graphs, output_code=output_code,
                    perf_hints=perf_hints)
    if modules is not None and not isinstance(modules, dict):
        raise TypeError(f"set_logs(): modules must be a dict of name -> level or bool, got {type(modules).__name__}")
    for alias, value in itertools.chain(settings.items(), (modules or {}).items()):
        if value is None:
            continue
        if alias == "all":
            alias = "kiln"
        if log_registry.is_artifact(alias):
            if not isinstance(value, bool):
                raise ValueError(f"Expected bool to enable artifact {alias}, received {value}")
            if value:
                state.enable_artifact(alias)
        elif log_registry.is_log(alias) or alias in log_registry.child_log_qnames or _is_kiln_module(alias):
            if isinstance(value, bool) or value not in _LEVELS:
                raise ValueError(f"Unrecognized log level for log {alias}: {value!r}, valid level values "
                                 f"are: {','.join(str(k) for k in _LEVELS)}")
            if log_registry.is_log(alias):
                state.enable_log(log_registry.log_alias_to_log_qnames[alias], value)
            else:
                _enable_module(state, alias, value)
        else:
            raise ValueError(f"Unrecognized log or artifact name passed to set_logs: {alias!r}; valid names: "
                             f"{', '.join(n for n in log_registry.valid_names() if n != 'kiln')}, or a kiln module name")
    _apply(state)


# --- applying a setting to Python's loggers ----------------------------------------------------------
class KilnLogsFormatter(logging.Formatter):
    """`[kiln] [graph_breaks] [0/1] message`: the artifact's name, or the log's (`dynamo`) for a
    component's record (none for kiln's other modules); the compile ID while a frame is compiled
    (kiln/_guards.py: frame 0's second compile); the level when it is not DEBUG or INFO."""

    def format(self, record):
        tag = getattr(logging.getLogger(record.name), "artifact_name", None) or _alias_of(record.name)
        text = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            text = text.rstrip("\n") + "\n" + record.exc_text
        level = "" if record.levelno <= logging.INFO else f"{record.levelname}: "
        compile_id = current_compile_id()
        where = f"[{compile_id}] " if compile_id is not None else ""
        return f"[kiln] {'' if tag == 'kiln' else f'[{tag}] '}{where}{level}{text}"


def _alias_of(qname):
    best, alias = "", qname
    for name, qnames in log_registry.log_alias_to_log_qnames.items():
        for q in qnames:
            if (qname == q or qname.startswith(q + ".")) and len(q) > len(best) and name != "kiln":
                best, alias = q, name
    return alias if best else ("kiln" if qname.startswith("kiln") else qname)


class _StderrHandler(logging.StreamHandler):
    """Writes to sys.stderr as it is at each record, not as it was when logging was set up
    (pytest, notebooks and contextlib.redirect_stderr replace it later)."""

    def __init__(self):
        logging.Handler.__init__(self)

    @property
    def stream(self):
        return sys.stderr


_handlers = weakref.WeakSet()  # the handlers kiln made, so a user's own are never removed


def _formatter():
    fmt = os.environ.get(LOG_FORMAT_ENV_VAR)
    if fmt is None:
        return KilnLogsFormatter()
    return logging.Formatter(logging.BASIC_FORMAT if fmt in ("short", "basic") else fmt)


def _add_handler(logger, handler):
    handler.setFormatter(_formatter())
    handler.setLevel(logging.DEBUG)
    _handlers.add(handler)
    logger.addHandler(handler)


def _reset_logs():
    for qname in log_registry.get_log_qnames():
        logger = logging.getLogger(qname)
        logger.setLevel(logging.WARNING)
        logger.propagate = False
        for handler in [h for h in logger.handlers if h in _handlers]:
            logger.removeHandler(handler)
            handler.close()
    for qname in itertools.chain(log_registry.artifact_log_qnames, log_registry.child_log_qnames):
        logger = logging.getLogger(qname)
        logger.setLevel(logging.NOTSET)
        logger.propagate = True


def _apply(state):
    global log_state
    _reset_logs()
    log_state = state
    for qname in log_registry.get_log_qnames():
        if qname != "kiln":  # below `kiln` (WARNING), a component inherits unless the setting names it
            logging.getLogger(qname).setLevel(logging.NOTSET)
    for qname, level in state.log_qname_to_level.items():
        logging.getLogger(qname).setLevel(level)
    out = os.environ.get(LOG_OUT_ENV_VAR)
    for qname in log_registry.get_log_qnames():
        logger = logging.getLogger(qname)
        _add_handler(logger, _StderrHandler())
        if out:
            _add_handler(logger, logging.FileHandler(out))
    for qname in log_registry.artifact_log_qnames:
        _configure_artifact_log(logging.getLogger(qname))


def _init_logs():
    """Reads KILN_LOGS (at `import kiln`) and sets every registered logger accordingly."""
    setting = os.environ.get(LOG_ENV_VAR)
    _apply(_parse_log_settings(setting) if setting is not None else LogState())
