"""The Python package's layering: no import cycle crosses packages. A module that imports another,
at module level or inside a function, while that one imports it back, ties two layers together
(fake tensors and nn.Parameter, Tensor and autograd, Inductor's graph and its autotuner: issue 20);
the cycle goes where the lower module stops naming the upper one. Cycles inside one package (a
package and the modules it registers, Dynamo's variable trackers) are how Python packages are built
and stay allowed, as in PyTorch."""
import ast
import os

ROOT = os.path.join(os.path.dirname(__file__), "..", "python")


def _modules():
    mods = {}
    for folder, _, files in os.walk(os.path.join(ROOT, "kiln")):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                name = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                mods[name[:-len(".__init__")] if name.endswith(".__init__") else name] = path
    return mods


def _imports(path, mods):
    """The kiln modules a file imports anywhere in it (`from a import b` counts a.b when that is a module)."""
    def resolve(name):
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name

    found = set()
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.Import):
            found |= {resolve(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {resolve(f"{node.module}.{a.name}") for a in node.names}
    return found - {""}


def _package(name):
    return name.rpartition(".")[0]


def test_no_import_cycle_crosses_packages():
    mods = _modules()
    edges = {name: _imports(path, mods) - {name} for name, path in mods.items()}
    crossing = set()
    for a, targets in edges.items():
        for b in targets:
            if a in edges.get(b, ()) and "kiln" not in (a, b) and _package(a) != _package(b) \
                    and not b.startswith(a + ".") and not a.startswith(b + "."):
                crossing.add(tuple(sorted((a, b))))
    assert not crossing, f"import cycles across packages: {sorted(crossing)}"


def test_the_graph_finds_a_cycle():
    """The check itself: the edges it reads see both directions of a known pair of imports."""
    mods = _modules()
    assert "kiln.autograd" in _imports(mods["kiln.nn.modules.module"], mods) or \
        "kiln._tensor" in _imports(mods["kiln.nn.parameter"], mods)
    assert "kiln.nn.parameter" in _imports(mods["kiln._subclasses.fake_tensor"], mods)


def test_inductor_loads_at_the_first_compile():
    """kiln.compile registers "inductor" by name (kiln._dynamo.backends.inductor); the package itself
    (lowering, LLVM bindings, decompositions) is imported only when a first graph compiles."""
    import subprocess
    import sys

    code = ("import sys, kiln\n"
            "f = kiln.compile(lambda x: x * 2)\n"
            "assert 'kiln._inductor' not in sys.modules, 'imported by kiln.compile'\n"
            "assert kiln._dynamo.list_backends() and 'inductor' in kiln._dynamo.list_backends()\n"
            "assert 'kiln._inductor' not in sys.modules, 'imported by list_backends'\n"
            "f(kiln.ones(3))\n"
            "assert 'kiln._inductor.compile_fx' in sys.modules\n")
    env = dict(os.environ, PYTHONPATH=os.path.abspath(ROOT))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
