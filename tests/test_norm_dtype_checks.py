"""layer_norm, group_norm and batch_norm check input and parameter dtypes in PyTorch's order
(NormStatDtype in tensor/ops/norm.cc): a parameter whose dtype differs from the input's makes the
call "mixed", which needs float32 parameters and then a 16-bit input, before a non-floating input
is refused. Each pair against PyTorch 2.13: the same success, or the same exception class and
message start. (Fuzz seed 211, program 2796: an int64 input with float64 parameters.)"""

import pytest

import kiln

torch = pytest.importorskip("torch")

PAIRS = [("int64", "float64"), ("int64", "float32"), ("int64", "int64"), ("float32", "float64"),
         ("float64", "float32"), ("bfloat16", "float64"), ("float16", "float32"), ("bfloat16", "float32"),
         ("int32", "float32"), ("bool", "float32"), ("float32", "float32"), ("float16", "float16")]

OPS = {
    "layer_norm": lambda lib, x, w: lib.nn.functional.layer_norm(x, (4,), w, w),
    "group_norm": lambda lib, x, w: lib.nn.functional.group_norm(x, 2, w, w),
    "batch_norm": lambda lib, x, w: lib.nn.functional.batch_norm(x, None, None, w, w, training=True),
}


def _outcome(lib, op, input_dtype, param_dtype):
    x = lib.ones(3, 4, dtype=getattr(lib, input_dtype))
    w = lib.ones(4, dtype=getattr(lib, param_dtype))
    try:
        out = OPS[op](lib, x, w)
    except Exception as e:  # noqa: BLE001 - the class and message are what is compared
        return type(e).__name__, str(e).split(".")[0].split("(")[0][:40]
    return "ok", str(out.dtype).split(".")[1]


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dtypes", PAIRS, ids=str)
def test_dtype_checks_as_torch(op, dtypes):
    got, expected = _outcome(kiln, op, *dtypes), _outcome(torch, op, *dtypes)
    assert got[0] == expected[0], (got, expected)
    if got[0] in ("ok", "RuntimeError"):
        assert got == expected
