"""KILN_LOGS and kiln._logging.set_logs against TORCH_LOGS and torch._logging.set_logs: help, unknown
names, the +/- verbosity prefixes, what each level prints, set_logs and its errors, the old
kiln._dynamo.logs import path."""

import logging
import os
import subprocess
import sys

import pytest

import kiln
from kiln._logging import _internal
from conftest import requires_torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python"))
ENV.pop("KILN_LOGS", None)

# A compiled function with a graph break (print), then a call that recompiles it (float64).
PROGRAM = """
import kiln
def f(x):
    y = x.sin()
    print("between")
    return y + 1
cf = kiln.compile(f, backend="inductor")
cf(kiln.ones(3))
cf(kiln.ones(3, dtype=kiln.float64))
print("done")
"""


def run(code, **env):
    return subprocess.run([sys.executable, "-c", code], env=dict(ENV, **env), capture_output=True, text=True,
                          timeout=300)


@pytest.fixture
def default_logs(monkeypatch):
    """set_logs in this process, with the defaults restored after the test."""
    monkeypatch.delenv("KILN_LOGS", raising=False)
    yield
    kiln._logging.set_logs()


# --- KILN_LOGS=help and unknown names --------------------------------------------------------------------
def test_help_lists_every_name_with_its_description_as_a_value_error():
    """As TORCH_LOGS=help: the import raises ValueError whose message is the list."""
    out = run("import kiln; print('imported')", KILN_LOGS="help")
    assert out.returncode != 0 and out.stdout == ""
    assert "ValueError" in out.stderr
    assert "KILN_LOGS Info" in out.stderr and '+dynamo' in out.stderr
    lines = out.stderr.splitlines()
    for name in _internal.log_registry.artifact_names:
        described = [line for line in lines if line.split()[:1] == [name]]
        assert described and _internal.log_registry.artifact_descriptions[name] in described[0], name
    for name in ("all", "dynamo", "aot", "inductor"):
        assert any(line.split()[:1] == [name] and len(line.split()) > 1 for line in lines), name


@requires_torch
def test_kiln_names_are_torch_names():
    from torch._logging._internal import log_registry as torch_registry

    for name in _internal.log_registry.valid_names():
        if name == "kiln":  # torch's is `torch`
            continue
        assert name == "all" or torch_registry.is_log(name) or torch_registry.is_artifact(name), name
        assert _internal.log_registry.is_artifact(name) == torch_registry.is_artifact(name), name


def test_unknown_name_fails_the_import_naming_it_and_the_valid_names():
    out = run("import kiln", KILN_LOGS="dynamo,bogus")
    assert out.returncode != 0
    err = out.stderr
    assert "ValueError" in err and "Invalid log settings: dynamo,bogus" in err and "Unknown: 'bogus'" in err
    assert 'try KILN_LOGS="help"' in err
    valid = err.split("Valid settings:")[1]
    for name in ("all", "dynamo", "graph_breaks", "guards", "recompiles", "output_code", "aot_graphs"):
        assert name in valid


@requires_torch
@pytest.mark.parametrize("setting", ["bogus", "dynamo,bogus", "dynamo,,guards", "dyn amo", "+", "graph_breaks;guards"])
def test_invalid_settings_raise_value_error_like_torch(setting):
    from torch._logging._internal import _parse_log_settings as torch_parse

    with pytest.raises(ValueError, match="Invalid log settings"):
        torch_parse(setting)
    with pytest.raises(ValueError, match="Invalid log settings") as info:
        _internal._parse_log_settings(setting)
    assert "Valid settings:" in str(info.value) and "graph_breaks" in str(info.value)


@requires_torch
def test_verbosity_prefixes_set_the_levels_torch_sets():
    from torch._logging._internal import _parse_log_settings as torch_parse

    setting = "+dynamo,-inductor,aot,guards,+recompiles"
    theirs, ours = torch_parse(setting), _internal._parse_log_settings(setting)
    for alias, kiln_qname, torch_qname in (("dynamo", "kiln._dynamo", "torch._dynamo"),
                                           ("inductor", "kiln._inductor", "torch._inductor"),
                                           ("aot", "kiln._functorch", "torch._functorch.aot_autograd")):
        assert ours.log_qname_to_level[kiln_qname] == theirs.log_qname_to_level[torch_qname], alias
    assert ours.log_qname_to_level["kiln._dynamo"] == logging.DEBUG
    assert ours.log_qname_to_level["kiln._inductor"] == logging.ERROR
    assert ours.artifact_names == theirs.artifact_names == {"guards", "recompiles"}
    assert _internal._parse_log_settings("all").log_qname_to_level == {"kiln": logging.INFO}
    assert _internal._parse_log_settings("").log_qname_to_level == {}


# --- what each setting prints ----------------------------------------------------------------------------
def test_component_levels_choose_the_messages():
    info = run(PROGRAM, KILN_LOGS="dynamo")
    assert info.returncode == 0, info.stderr
    assert "[kiln] [dynamo] [0/0] compiled f" in info.stderr
    assert "[graph_breaks]" not in info.stderr and "[guards]" not in info.stderr

    debug = run(PROGRAM, KILN_LOGS="+dynamo")  # the component's artifacts come with DEBUG...
    assert "[kiln] [dynamo] [0/0] compiled f" in debug.stderr
    for artifact in ("graph_breaks", "guards", "recompiles", "graph_code"):
        assert f"[kiln] [{artifact}]" in debug.stderr, artifact
    assert "[bytecode]" not in debug.stderr  # ...but not those off by default
    assert "[inductor]" not in debug.stderr and "[aot]" not in debug.stderr

    quiet = run(PROGRAM, KILN_LOGS="-dynamo")
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert quiet.stdout == "between\nbetween\ndone\n"


def test_artifacts_alone_all_and_module_names():
    artifacts = run(PROGRAM, KILN_LOGS="graph_breaks, recompiles,bytecode")
    err = artifacts.stderr
    assert "[kiln] [graph_breaks] [0/0] Graph break: print()" in err
    assert "[kiln] [recompiles] [0/1] Recompiling function f" in err and "dtype is float64" in err
    assert "[kiln] [bytecode] [0/0] code for f:" in err
    assert "[dynamo]" not in err and "[guards]" not in err

    everything = run(PROGRAM, KILN_LOGS="all")
    assert "[kiln] [dynamo] [0/0] compiled f" in everything.stderr
    assert "[kiln] [inductor] [0/0] compiled a graph of" in everything.stderr
    assert "[kiln] [aot] [0/0] traced and compiled an inference graph" in everything.stderr
    assert "[guards]" not in everything.stderr  # all is INFO: artifacts need DEBUG or their name

    module = run(PROGRAM, KILN_LOGS="+kiln._dynamo.guards")
    assert "[kiln] [guards] [0/0] GUARDS:" in module.stderr and "[graph_breaks]" not in module.stderr


def test_logs_out_and_format(tmp_path):
    path = tmp_path / "logs.txt"
    out = run(PROGRAM, KILN_LOGS="dynamo", KILN_LOGS_OUT=str(path), KILN_LOGS_FORMAT="%(levelname)s %(name)s: %(message)s")
    assert out.returncode == 0, out.stderr
    assert "INFO kiln._dynamo.convert_frame: compiled f" in out.stderr
    assert "INFO kiln._dynamo.convert_frame: compiled f" in path.read_text()


# --- set_logs -------------------------------------------------------------------------------------------
def test_set_logs_in_process(default_logs, capsys):
    def f(x):
        y = x.cos()
        print("between")
        return y * 2

    kiln._logging.set_logs(dynamo=logging.DEBUG, graph_breaks=True)
    kiln._dynamo.reset()
    kiln.compile(f, backend="eager")(kiln.ones(2))
    err = capsys.readouterr().err
    assert "[kiln] [graph_breaks] [0/0] Graph break: print()" in err and "[kiln] [dynamo] [0/0] compiled f" in err

    kiln._logging.set_logs(guards=True)  # a call replaces the previous setting entirely
    kiln._dynamo.reset()
    kiln.compile(f, backend="eager")(kiln.ones(2))
    err = capsys.readouterr().err
    assert "[kiln] [guards] [0/0] GUARDS:" in err and "[graph_breaks]" not in err and "[dynamo]" not in err

    kiln._logging.set_logs()
    kiln._dynamo.reset()
    kiln.compile(f, backend="eager")(kiln.ones(2))
    assert capsys.readouterr().err == ""
    kiln._dynamo.reset()


@requires_torch
@pytest.mark.parametrize("kwargs, message", [
    (dict(graph_breaks=1), "Expected bool to enable artifact graph_breaks, received 1"),
    (dict(dynamo=5), "Unrecognized log level for log dynamo: 5, valid level values are: 50,40,30,20,10,0"),
    (dict(dynamo=True), "Unrecognized log level for log dynamo: True"),
    (dict(modules={"bogus": logging.DEBUG}), "Unrecognized log or artifact name passed to set_logs: 'bogus'"),
])
def test_set_logs_errors_like_torch(default_logs, kwargs, message):
    import torch

    try:
        with pytest.raises(ValueError):
            torch._logging.set_logs(**kwargs)
    finally:
        torch._logging.set_logs()
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        kiln._logging.set_logs(**kwargs)


def test_set_logs_names_the_valid_names_and_takes_modules(default_logs, capsys):
    with pytest.raises(TypeError, match="unknown name.*schedule.*valid names: .*graph_breaks"):
        kiln._logging.set_logs(schedule=True)
    with pytest.raises(ValueError, match="Unrecognized log or artifact name passed to set_logs: 'kiln.no_such'"):
        kiln._logging.set_logs(modules={"kiln.no_such": logging.DEBUG})
    with pytest.raises(TypeError, match="modules must be a dict"):
        kiln._logging.set_logs(modules=["kiln._dynamo"])
    kiln._logging.set_logs(modules={"kiln._dynamo.guards": logging.DEBUG, "recompiles": True})
    assert logging.getLogger("kiln._dynamo.guards").level == logging.DEBUG
    assert _internal.artifact_enabled("recompiles") and not _internal.artifact_enabled("graph_breaks")
    kiln._logging.set_logs()
    assert logging.getLogger("kiln._dynamo.guards").level == logging.NOTSET
    assert not _internal.artifact_enabled("recompiles")


def test_set_logs_is_ignored_while_kiln_logs_is_set():
    code = PROGRAM.replace("import kiln\n", "import kiln\nkiln._logging.set_logs(guards=True)\n", 1)
    out = run(code, KILN_LOGS="graph_breaks")
    assert out.returncode == 0, out.stderr
    assert "Using KILN_LOGS environment variable for log settings, ignoring call to set_logs" in out.stderr
    assert "[graph_breaks]" in out.stderr and "[guards]" not in out.stderr


def test_old_import_path_still_works(default_logs):
    from kiln._dynamo import logs

    assert logs.set_logs is kiln._logging.set_logs
    kiln._logging.set_logs(guards=True, dynamo=logging.INFO)
    assert logs.enabled("guards") and logs.enabled("dynamo") and not logs.enabled("graph_breaks")
    assert logs.enabled_set() == {"guards"}
    with pytest.raises(ValueError, match="unknown log or artifact 'nope'.*graph_breaks"):
        logs.log("nope", "text")


def test_an_unregistered_artifact_is_refused():
    with pytest.raises(ValueError, match="'not_an_artifact' not registered.*_registrations.py"):
        kiln._logging.getArtifactLogger(__name__, "not_an_artifact")


# --- compile IDs ----------------------------------------------------------------------------------------
def test_compile_ids_number_frames_and_their_recompiles(default_logs, capsys):
    """[frame/recompile] as PyTorch's: the resume function after a break is frame 1, a guard failure
    is the frame's next compile, and reset() numbers from 0 again."""
    from kiln._guards import CompileContext, CompileId

    seen = []

    def backend(gm, example_inputs):
        seen.append(CompileContext.current_compile_id())
        return gm.forward

    def f(x):
        y = x.cos()
        print("between")
        return y * 2

    kiln._dynamo.reset()
    kiln._logging.set_logs(graph_breaks=True, recompiles=True)
    cf = kiln.compile(f, backend=backend)
    cf(kiln.ones(2))
    cf(kiln.ones(2, dtype=kiln.float64))
    assert seen == [CompileId(0, 0), CompileId(1, 0), CompileId(0, 1), CompileId(1, 1)]
    assert str(seen[-1]) == "1/1" and CompileContext.current_compile_id() is None
    err = capsys.readouterr().err
    assert "[kiln] [graph_breaks] [0/0] Graph break: print()" in err
    assert "[kiln] [recompiles] [0/1] Recompiling function f" in err
    assert "[kiln] [recompiles] [1/1] Recompiling function __resume_in_f" in err
    kiln._dynamo.reset()
    seen.clear()
    kiln.compile(f, backend=backend)(kiln.ones(3))
    assert seen[0] == CompileId(0, 0)
