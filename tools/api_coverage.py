"""tools/api_coverage.py: which public names of PyTorch 2.13's API kiln lacks (issue 17).

    PYTHONPATH=python ~/.cache/kiln/venv-py3.11/bin/python tools/api_coverage.py [--list] [--json FILE]

Compares seven namespace pairs, torch <-> kiln, torch.Tensor <-> kiln.Tensor, torch.nn <-> kiln.nn,
torch.nn.functional <-> kiln.nn.functional, torch.optim <-> kiln.optim, torch.linalg <-> kiln.linalg
and torch.fft <-> kiln.fft, by name only (`hasattr` on kiln's side; a kiln namespace that does not
import counts as lacking every name). Prints one line per namespace with the categories it did not
count, `--list` the lacking names per namespace, `--json` everything, and a final summary line.

What counts as public (the rules are RULES below; each category is printed with its size):
- a module's names are its `__all__` plus the names of `dir()` that `__all__` leaves out (torch's
  `__all__` omits `unique`, `set_grad_enabled`, `channels_last`; torch.fft's omits `hfft2`), without a
  leading underscore. Four filters drop what a module's namespace holds for its own use rather than
  as API: module objects (submodules are namespaces, not names; the seven above are compared as
  their own pair, and torch.__all__ lists `torch.export`), typing helpers (classes of `typing`,
  `collections.abc` and `builtins` used as aliases, `TYPE_CHECKING`, `BroadcastingList*`), imported
  torch helpers (`torch.Tensor` seen from another module, as torch.fft.__all__ lists it; objects of
  `torch.overrides`, `torch._jit_internal`, `torch._utils*`; `has_torch_function*`), and, for names
  only dir() shows, plain data (dicts of docstring fragments, build flags; `torch.pi` stays).
- torch.Tensor's names are `dir(torch.Tensor)` without a leading underscore, plus the dunders user
  code reaches through syntax or a protocol (TENSOR_DUNDERS: operators with their reflected and
  in-place forms, comparisons, indexing, iteration, conversions, numpy and DLPack, deepcopy and
  pickling, hashing, formatting, `__torch_function__`/`__torch_dispatch__`). A dunder is present in
  kiln only when kiln.Tensor defines it rather than inheriting `object`'s (or setting it to None).
- categories of real API that kiln does not mean to mirror are not counted either, never silently:
  view_copy variants (aten ops tagged `view_copy`, such as `torch.t_copy`), quantization, sparse
  layouts, backend-specific kernels (cuDNN, MIOpen, MKL-DNN, FBGEMM, Vulkan), TorchScript and C++
  binding classes (pybind11 classes of `torch._C` such as `torch.Graph`), legacy typed Tensor/Storage
  classes (`torch.FloatTensor`, `torch.HalfStorage`) and the functions removed in PyTorch 1.9+ that
  now only raise (`torch.eig`, `torch.lstsq`, `Tensor.symeig`).
"""

import argparse
import collections.abc
import importlib
import json
import re
import sys
import types
import typing

NAMESPACES = [  # (label, torch module or "torch.Tensor", kiln module or "kiln.Tensor")
    ("torch", "torch", "kiln"),
    ("torch.Tensor", "torch.Tensor", "kiln.Tensor"),
    ("torch.nn", "torch.nn", "kiln.nn"),
    ("torch.nn.functional", "torch.nn.functional", "kiln.nn.functional"),
    ("torch.optim", "torch.optim", "kiln.optim"),
    ("torch.linalg", "torch.linalg", "kiln.linalg"),
    ("torch.fft", "torch.fft", "kiln.fft"),
]

_BINARY = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor", "lshift",
           "rshift"]
# Python 2's __div__/__long__/__nonzero__ are left out: Python 3 syntax never reaches them.
TENSOR_DUNDERS = frozenset(
    [f"__{op}__" for op in _BINARY] + [f"__r{op}__" for op in _BINARY] + [f"__i{op}__" for op in _BINARY]
    + ["__rsub__"]
    + [f"__{op}__" for op in ["eq", "ne", "lt", "le", "gt", "ge", "neg", "pos", "abs", "invert"]]
    + [f"__{op}__" for op in ["getitem", "setitem", "len", "iter", "reversed", "contains"]]
    + [f"__{op}__" for op in ["bool", "int", "float", "complex", "index"]]
    + ["__array__", "__array_wrap__", "__array_priority__", "__dlpack__", "__dlpack_device__"]
    + ["__deepcopy__", "__reduce_ex__", "__hash__", "__format__", "__repr__"]
    + ["__torch_function__", "__torch_dispatch__"])

_TYPING_MODULES = {"typing", "typing_extensions", "collections.abc", "builtins"}
_HELPER_MODULES = {"torch.overrides", "torch._jit_internal", "torch._utils", "torch._utils_internal"}
_DATA_TYPES = (bool, int, float, complex, str, bytes, dict, list, tuple, set, frozenset, type(None))

_QUANT = re.compile(r"^(q_|qu?int\d|quantiz|dequantiz|fake_quantiz|choose_qparams|qscheme$|int_repr$|"
                    r"per_(channel|tensor)_|is_quantized$|empty_quantized$|fused_moving_avg_obs_fake_quant$|"
                    r"Q[A-Za-z0-9]*Storage$)")
_SPARSE_NAMES = {"coalesce", "is_coalesced", "indices", "values", "crow_indices", "col_indices", "ccol_indices",
                 "row_indices", "sparse_dim", "dense_dim", "to_dense", "smm", "hsmm", "dsmm", "spmm", "saddmm",
                 "sspaddmm", "hspmm"}
_BACKEND = re.compile(r"^(cudnn_|miopen_|mkldnn_|fbgemm_|nnpack_|to_mkldnn$|is_mkldnn$|is_vulkan)")
_LEGACY_CLASS = re.compile(r"^[A-Za-z0-9]*(Storage|Tensor)$")
_CURRENT_CLASSES = {"Tensor", "TypedStorage", "UntypedStorage"}


def _module_of(obj):
    mod = getattr(obj, "__module__", None)
    return mod if isinstance(mod, str) else None


# --- filters: what a module's namespace holds for its own use, not as its API ------------------------

def _is_module(ns, name, obj):
    return isinstance(obj, types.ModuleType)


def _is_typing_helper(ns, name, obj):
    if name == "TYPE_CHECKING" or type(obj).__name__ == "BroadcastingListCls":
        return True
    if isinstance(obj, (typing.TypeVar, type(typing.Optional), type(typing.Optional[int]))):
        return True
    return isinstance(obj, type) and _module_of(obj) in _TYPING_MODULES or obj is collections.abc.Callable


def _is_imported_helper(ns, name, obj):
    import torch
    if obj is torch.Tensor and ns != "torch":
        return True
    return _module_of(obj) in _HELPER_MODULES or name.startswith("has_torch_function")


def _is_data(ns, name, obj):
    return type(obj) in _DATA_TYPES


# --- exclusions: public API of kinds kiln does not mean to mirror -----------------------------------

def _is_view_copy(ns, name, obj):
    import torch
    if ns not in ("torch", "torch.Tensor") or not name.endswith("_copy"):
        return False
    packet = getattr(torch.ops.aten, name, None)
    return packet is not None and any(
        torch.Tag.view_copy in getattr(packet, o).tags for o in packet.overloads())


def _is_quantization(ns, name, obj):
    return bool(_QUANT.match(name))


def _is_sparse(ns, name, obj):
    return "sparse" in name or name in _SPARSE_NAMES


def _is_backend_kernel(ns, name, obj):
    return bool(_BACKEND.match(name))


def _is_binding_class(ns, name, obj):
    return type(obj).__name__ == "pybind11_type"


def _is_legacy_class(ns, name, obj):
    return ns == "torch" and bool(_LEGACY_CLASS.match(name)) and name not in _CURRENT_CLASSES


def _is_removed(ns, name, obj):
    import torch
    if ns == "torch.Tensor":  # Tensor.eig and the like raise as their torch functions do
        obj = getattr(torch, name, None)
    return ns in ("torch", "torch.Tensor") and _module_of(obj) == "torch._linalg_utils"


RULES = [  # (category, predicate, dir_only): the first that matches a name keeps it out of the count
    # filters; all but plain data apply to __all__'s names too (torch.__all__ holds torch.export,
    # torch.fft.__all__ torch.Tensor), while torch.__all__'s e, pi, inf and nan are API
    ("submodules and imported modules", _is_module, False),
    ("typing helpers", _is_typing_helper, False),
    ("imported torch helpers", _is_imported_helper, False),
    ("plain data (docstring fragments, build flags)", _is_data, True),
    # exclusions
    ("view_copy variants", _is_view_copy, False),
    ("quantization", _is_quantization, False),
    ("sparse layouts", _is_sparse, False),
    ("backend-specific kernels (cuDNN, MIOpen, MKL-DNN, FBGEMM, Vulkan)", _is_backend_kernel, False),
    ("TorchScript and C++ binding classes", _is_binding_class, False),
    ("legacy typed Tensor/Storage classes", _is_legacy_class, False),
    ("removed, raise on call (torch.eig, torch.lstsq, ...)", _is_removed, False),
]


def _load(path):
    """The object at a dotted path ("torch.nn", "kiln.Tensor"), or None when it does not import."""
    try:
        return importlib.import_module(path)
    except ImportError:
        pass
    parent, _, attr = path.rpartition(".")
    try:
        return getattr(importlib.import_module(parent), attr) if parent else None
    except (ImportError, AttributeError):
        return None


def public_names(ns, obj):
    """({counted name}, {category: [names not counted]}) of the torch-side namespace `ns`."""
    skipped = collections.defaultdict(list)
    if isinstance(obj, type):  # torch.Tensor
        declared, others = {n for n in dir(obj) if not n.startswith("_") or n in TENSOR_DUNDERS}, set()
    else:
        declared = set(getattr(obj, "__all__", ()))
        others = {n for n in dir(obj) if not n.startswith("_")} - declared
    counted = set()
    for name in sorted(declared | others):
        value = getattr(obj, name, None)
        category = next((c for c, rule, dir_only in RULES
                         if not (dir_only and name in declared) and rule(ns, name, value)), None)
        if category is None:
            counted.add(name)
        else:
            skipped[category].append(name)
    return counted, dict(skipped)


def has(kiln_ns, name):
    """Whether the kiln-side namespace defines `name`; a dunder inherited from object does not count."""
    if kiln_ns is None:
        return False
    try:
        value = getattr(kiln_ns, name)
    except Exception:  # a missing name, or a property that needs an instance
        return False
    if name.startswith("__"):
        return value is not None and value is not getattr(object, name, None)
    return True


def compare(names, kiln_ns):
    """(sorted names kiln has, sorted names kiln lacks)."""
    present = sorted(n for n in names if has(kiln_ns, n))
    return present, sorted(set(names) - set(present))


def coverage():
    """{label: {"total", "has", "lacks", "not_counted", "kiln_namespace"}} over NAMESPACES."""
    result = {}
    for label, torch_path, kiln_path in NAMESPACES:
        names, skipped = public_names(label, _load(torch_path))
        kiln_ns = _load(kiln_path)
        present, lacking = compare(names, kiln_ns)
        result[label] = {"total": len(names), "has": present, "lacks": lacking,
                         "kiln_namespace": kiln_path if kiln_ns is not None else None,
                         "not_counted": {c: skipped[c] for c, _, _ in RULES if c in skipped}}
    return result


def summary(result):
    have = sum(len(r["has"]) for r in result.values())
    total = sum(r["total"] for r in result.values())
    return (f"api coverage: kiln has {have} of {total} public names ({100 * have / max(total, 1):.0f}%) "
            f"of {', '.join(result)}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--list", action="store_true", help="print the lacking names per namespace")
    parser.add_argument("--json", metavar="FILE", help="write every namespace's names to FILE")
    args = parser.parse_args(argv)
    result = coverage()
    for label, r in result.items():
        absent = "" if r["kiln_namespace"] else " (no kiln namespace)"
        print(f"{label}: {r['total']} public names, kiln has {len(r['has'])}, lacks {len(r['lacks'])}{absent}")
        if r["not_counted"]:
            print("    not counted: " + ", ".join(f"{c} {len(n)}" for c, n in r["not_counted"].items()))
    if args.list:
        for label, r in result.items():
            print(f"\n{label} lacks {len(r['lacks'])}:")
            for name in r["lacks"]:
                print(f"  {name}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"namespaces": result, "summary": summary(result)}, f, indent=1)
    print(summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
