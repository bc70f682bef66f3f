"""kiln.save / kiln.load: round trips of nested structures and tensors of every dtype and layout, views
sharing storage, optimizer state dicts, and clear RuntimeErrors on truncated, corrupted or foreign files."""

import collections
import io
import json
import math
import re
import zipfile
import zlib

import numpy as np
import pytest

import kiln
from conftest import DTYPE_NAMES, requires_torch, torch


def _round_trip(obj):
    buf = io.BytesIO()
    kiln.save(obj, buf)
    buf.seek(0)
    return kiln.load(buf)


def _same_tensor(a, b):
    assert isinstance(b, kiln.Tensor)
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    x, y = a.tolist(), b.tolist()
    np.testing.assert_array_equal(np.array(x, dtype=float), np.array(y, dtype=float))


@pytest.mark.parametrize("name", DTYPE_NAMES)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3, 4)])
def test_tensor_round_trip(name, shape):
    rng = np.random.default_rng(0)
    dtype = getattr(kiln, name)
    if name == "bool":
        t = kiln.tensor(rng.random(shape) > 0.5) if shape else kiln.tensor(True)
    else:
        t = (kiln.tensor(rng.uniform(-100, 100, size=shape)) if shape else kiln.tensor(-7.25)).to(dtype)
    _same_tensor(t, _round_trip(t))


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64"])
def test_special_float_values(name):
    t = kiln.tensor([float("nan"), float("inf"), -float("inf"), -0.0, 1e-3, 65504.0, 3.0e38 if name in
                     ("bfloat16", "float32", "float64") else 1.0], dtype=getattr(kiln, name))
    r = _round_trip(t)
    a, b = np.array(t.tolist()), np.array(r.tolist())
    np.testing.assert_array_equal(a, b)
    assert math.copysign(1, r[3].item()) == -1.0


def test_layouts_and_views_share_storage():
    base = kiln.arange(24.0).reshape(4, 6)
    obj = {"base": base, "t": base.T, "slice": base[1:3, ::2], "row": base[2], "elem": base[3, 5],
           "other": kiln.arange(3.0), "expanded": base[0, :3].expand(5, 3)}
    r = _round_trip(obj)
    for k, v in obj.items():
        _same_tensor(v, r[k])
        assert r[k].stride() == v.stride() and r[k].storage_offset() == v.storage_offset()
    r["base"][2, 0] = -1.0  # writes through every view of the same storage
    assert r["row"][0].item() == -1.0 and r["t"][0, 2].item() == -1.0 and r["slice"][1, 0].item() == -1.0
    assert r["other"].tolist() == [0.0, 1.0, 2.0]
    assert obj["base"][2, 0].item() == 12.0  # the original is untouched


def test_view_alone_saves_its_reach_only():
    base = kiln.arange(1000.0)
    buf = io.BytesIO()
    kiln.save(base[:10], buf)
    assert len(buf.getvalue()) < 1000  # bytes past the view's last element are not written
    buf.seek(0)
    assert kiln.load(buf).tolist() == list(range(10))


def test_nested_structure_round_trip():
    obj = collections.OrderedDict([
        ("z", 1), ("a", [1, -2 ** 70, 2.5, float("nan"), float("inf"), None, True, False, "text", "ünï"]),
        ("tuple", (1, (2, [3]), ())), (7, {"int key": 1, 2: "two", (1, 2): "tuple key", None: 0.5}),
        ("dtype", kiln.bfloat16), ("size", kiln.Size([2, 3])), ("empty", {}),
    ])
    r = _round_trip(obj)
    assert type(r) is collections.OrderedDict and list(r) == list(obj)
    assert r["z"] == 1 and r["a"][:3] == [1, -2 ** 70, 2.5] and math.isnan(r["a"][3])
    assert r["a"][4:] == obj["a"][4:] and type(r["a"][6]) is bool and type(r["a"][0]) is int
    assert r["tuple"] == (1, (2, [3]), ()) and isinstance(r["tuple"][1], tuple) and isinstance(r["tuple"][1][1], list)
    assert r[7] == obj[7] and type(r[7]) is dict
    assert r["dtype"] == kiln.bfloat16 and r["size"] == kiln.Size([2, 3]) and r["empty"] == {}


def test_paths_and_file_objects(tmp_path):
    obj = {"w": kiln.ones(2, 3), "n": 3}
    for target in [str(tmp_path / "a.kiln"), tmp_path / "b.kiln"]:
        kiln.save(obj, target)
        r = kiln.load(target)
        _same_tensor(obj["w"], r["w"])
    with open(tmp_path / "c.kiln", "wb") as f:
        kiln.save(obj, f)
    with open(tmp_path / "c.kiln", "rb") as f:
        assert kiln.load(f)["n"] == 3
    with pytest.raises(FileNotFoundError):
        kiln.load(tmp_path / "missing.kiln")


def test_file_layout_is_the_documented_one(tmp_path):
    x = kiln.arange(6, dtype=kiln.int32)
    kiln.save({"x": x, "y": x[2:]}, tmp_path / "f.kiln")
    with zipfile.ZipFile(tmp_path / "f.kiln") as zf:
        assert zf.namelist() == ["kiln/header.json", "kiln/storages/0"]
        header = json.loads(zf.read("kiln/header.json"))
        assert header["format"] == "kiln.save" and header["version"] == 1 and header["byteorder"] == "little"
        assert header["storages"] == [{"dtype": "int32", "nbytes": 24}]
        assert header["root"] == {"$dict": [["x", {"$tensor": {"storage": 0, "dtype": "int32", "shape": [6],
                                                              "stride": [1], "offset": 0, "requires_grad": False}}],
                                            ["y", {"$tensor": {"storage": 0, "dtype": "int32", "shape": [4],
                                                              "stride": [1], "offset": 2, "requires_grad": False}}]]}
        assert zf.read("kiln/storages/0") == np.arange(6, dtype="<i4").tobytes()


def test_unsupported_objects_raise_type_error():
    class Thing:
        pass

    for bad in [Thing(), {"a": [1, {2, 3}]}, b"bytes", lambda: 0]:
        with pytest.raises(TypeError, match="kiln.save: cannot save an object of type"):
            kiln.save(bad, io.BytesIO())


def _saved_bytes(obj):
    buf = io.BytesIO()
    kiln.save(obj, buf)
    return buf.getvalue()


def _load_bytes(data, tmp_path, name="bad.kiln"):
    path = tmp_path / name
    path.write_bytes(data)
    return kiln.load(path)


def test_truncated_files(tmp_path):
    data = _saved_bytes({"w": kiln.arange(100.0), "b": [1, 2]})
    for cut in [0, 1, 10, len(data) // 3, len(data) // 2, len(data) - 30, len(data) - 1]:
        with pytest.raises(RuntimeError, match=r"kiln.load: .*bad.kiln") as e:
            _load_bytes(data[:cut], tmp_path)
        assert "truncated" in str(e.value) or "not a kiln checkpoint" in str(e.value)
    assert (kiln.ones(2) + 1).tolist() == [2.0, 2.0]


def test_corrupted_bytes(tmp_path):
    data = bytearray(_saved_bytes({"w": kiln.arange(100.0)}))
    start = data.index(np.arange(100, dtype="<f4").tobytes())
    for pos in [start, start + 200, start + 399]:  # inside the tensor bytes: the CRC catches it
        bad = bytearray(data)
        bad[pos] ^= 0x55
        with pytest.raises(RuntimeError, match=r"bad.kiln.*(CRC|corrupted)"):
            _load_bytes(bytes(bad), tmp_path)
    header_pos = data.index(b'"format"')
    bad = bytearray(data)
    bad[header_pos + 3] ^= 0x01
    with pytest.raises(RuntimeError, match="bad.kiln"):
        _load_bytes(bytes(bad), tmp_path)


def test_foreign_files(tmp_path):
    with pytest.raises(RuntimeError, match="not a kiln checkpoint"):
        _load_bytes(b"hello world, not a zip file\n" * 10, tmp_path)
    with pytest.raises(RuntimeError, match="not a kiln checkpoint"):
        _load_bytes(b"", tmp_path)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("data.pkl", b"\x80\x04K\x01.")
    with pytest.raises(RuntimeError, match="no kiln/header.json entry"):
        _load_bytes(buf.getvalue(), tmp_path)


def _zip_with_header(header, storages=()):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("kiln/header.json", header if isinstance(header, (str, bytes)) else json.dumps(header))
        for i, data in enumerate(storages):
            zf.writestr(f"kiln/storages/{i}", data)
    return buf.getvalue()


def _tensor_node(**over):
    spec = {"storage": 0, "dtype": "float32", "shape": [2], "stride": [1], "offset": 0, "requires_grad": False}
    spec.update(over)
    return {"$tensor": spec}


GOOD_STORAGE = {"dtype": "float32", "nbytes": 8}
BAD_HEADERS = [
    ("not json", "{not json"),
    ("wrong format", {"format": "torch", "version": 1, "byteorder": "little", "storages": [], "root": None}),
    ("future version", {"format": "kiln.save", "version": 99, "byteorder": "little", "storages": [], "root": None}),
    ("missing root", {"format": "kiln.save", "version": 1, "byteorder": "little", "storages": []}),
    ("unknown node", {"root": {"$eval": "__import__('os').system('echo pwned')"}}),
    ("storage out of range", {"root": _tensor_node(storage=3)}),
    ("reach past storage", {"root": _tensor_node(shape=[3])}),
    ("offset past storage", {"root": _tensor_node(offset=2)}),
    ("negative stride", {"root": _tensor_node(stride=[-1])}),
    ("dtype mismatch", {"root": _tensor_node(dtype="int64")}),
    ("bad geometry", {"root": _tensor_node(shape="2")}),
    ("bad storage dtype", {"root": _tensor_node(), "storages": [{"dtype": "object", "nbytes": 8}]}),
    ("storage size lies", {"root": _tensor_node(), "storages": [{"dtype": "float32", "nbytes": 4}]}),
    ("bad dict item", {"root": {"$dict": [["a"]]}}),
    ("unhashable key", {"root": {"$dict": [[[1], 2]]}}),
    ("size past int64", {"root": {"$size": [2 ** 63]}}),
    ("integer tensor requires grad", {"root": _tensor_node(dtype="int64", shape=[1], requires_grad=True), "storages": [
        {"dtype": "int64", "nbytes": 8}]}),
    ("requires_grad not a bool", {"root": _tensor_node(requires_grad="yes")}),
    ("unknown device", {"root": _tensor_node(device="bogus:7")}),
    ("device this build lacks", {"root": _tensor_node(device="cuda:99")}),
]


@pytest.mark.parametrize("what,header", BAD_HEADERS, ids=[w for w, _ in BAD_HEADERS])
def test_malformed_headers(tmp_path, what, header):
    if isinstance(header, dict) and "format" not in header:
        header = {"format": "kiln.save", "version": 1, "byteorder": "little", "storages": [GOOD_STORAGE], **header}
    data = _zip_with_header(header, [np.zeros(2, dtype="<f4").tobytes()])
    with pytest.raises(RuntimeError, match="kiln.load: .*bad.kiln: "):
        _load_bytes(data, tmp_path)


def test_missing_storage_entry(tmp_path):
    header = {"format": "kiln.save", "version": 1, "byteorder": "little", "storages": [GOOD_STORAGE],
              "root": _tensor_node()}
    with pytest.raises(RuntimeError, match="entry for storage 0 is missing"):
        _load_bytes(_zip_with_header(header), tmp_path)


def test_optimizer_state_dict_round_trip():
    rng = np.random.default_rng(0)
    grads = [rng.standard_normal(4).tolist() for _ in range(8)]

    def run(opt, p, gs):
        for g in gs:
            p.grad = kiln.tensor(g)
            opt.step()

    p1 = kiln.tensor([1.0, 2.0, 3.0, 4.0])
    o1 = kiln.optim.Adam([p1], lr=0.1, amsgrad=True)
    run(o1, p1, grads[:4])
    saved = _round_trip({"opt": o1.state_dict(), "param": p1})
    assert saved["opt"]["param_groups"][0]["betas"] == (0.9, 0.999)
    assert isinstance(saved["opt"]["param_groups"][0]["betas"], tuple)
    assert saved["opt"]["state"][0]["step"].item() == 4.0
    p2 = saved["param"]
    o2 = kiln.optim.Adam([p2], lr=0.5)
    o2.load_state_dict(saved["opt"])
    run(o1, p1, grads[4:])
    run(o2, p2, grads[4:])
    assert p1.tolist() == p2.tolist()


def test_module_style_state_dict_round_trip():
    sd = collections.OrderedDict([("0.weight", kiln.randn(4, 3)), ("0.bias", kiln.zeros(4)),
                                  ("1.running_mean", kiln.zeros(4, dtype=kiln.float16)),
                                  ("1.num_batches_tracked", kiln.tensor(3))])
    r = _round_trip(sd)
    assert list(r) == list(sd)
    for k in sd:
        _same_tensor(sd[k], r[k])


@requires_torch
def test_values_match_torch_save_load():
    """The same data through torch.save/torch.load and kiln.save/kiln.load comes back identical."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 5))
    for name in ["float32", "float64", "bfloat16", "float16", "int64"]:
        k = _round_trip(kiln.tensor(a).to(getattr(kiln, name)))
        buf = io.BytesIO()
        torch.save(torch.tensor(a).to(getattr(torch, name)), buf)
        buf.seek(0)
        t = torch.load(buf)
        assert k.tolist() == t.tolist(), name


def test_requires_grad_round_trip():
    try:
        w = kiln.randn(3, 2).requires_grad_()
    except NotImplementedError:
        pytest.skip("needs kiln autograd")
    r = _round_trip({"w": w, "frozen": w.detach()})
    assert r["w"].requires_grad and r["w"].is_leaf and not r["frozen"].requires_grad
    _same_tensor(w.detach(), r["w"].detach())


def test_map_location_cpu():
    x = kiln.arange(4.0)
    buf = io.BytesIO()
    kiln.save({"x": x, "v": x[1:]}, buf)
    for loc in ["cpu", kiln.device("cpu"), {"cpu": "cpu"}]:
        buf.seek(0)
        r = kiln.load(buf, map_location=loc)
        assert r["x"].device.type == "cpu"
        r["x"][1] = 9.0
        assert r["v"][0].item() == 9.0


def test_scheduler_and_optimizer_state_dicts_round_trip():
    from kiln.optim import lr_scheduler as L

    makers = [lambda o: L.StepLR(o, 3), lambda o: L.MultiStepLR(o, [2, 4, 4]), lambda o: L.LambdaLR(o, lambda e: 0.5),
              lambda o: L.CosineAnnealingLR(o, 10), lambda o: L.LinearLR(o), lambda o: L.CyclicLR(o, 0.01, 0.1),
              lambda o: L.OneCycleLR(o, 0.1, total_steps=20), lambda o: L.ReduceLROnPlateau(o),
              lambda o: L.SequentialLR(o, [L.ConstantLR(o), L.ExponentialLR(o, 0.9)], milestones=[3])]
    for make in makers:
        for cls in (kiln.optim.SGD, kiln.optim.Adam, kiln.optim.RMSprop):
            p = kiln.ones(3)
            opt = cls([p], lr=0.1, **({"momentum": 0.9} if cls is not kiln.optim.Adam else {}))
            sched = make(opt)
            for _ in range(3):
                p.grad = kiln.ones(3)
                opt.step()
                sched.step(1.0) if isinstance(sched, L.ReduceLROnPlateau) else sched.step()
            saved = _round_trip({"optimizer": opt.state_dict(), "scheduler": sched.state_dict()})
            assert _plain(saved["scheduler"]) == _plain(sched.state_dict())
            assert _plain(saved["optimizer"]) == _plain(opt.state_dict())


def _plain(x):
    if isinstance(x, kiln.Tensor):
        return ("tensor", str(x.dtype), x.tolist())
    if isinstance(x, dict):
        return (type(x).__name__, {k: _plain(v) for k, v in x.items()})
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, [_plain(v) for v in x])
    return x


def test_float16_every_bit_pattern():
    """All 65536 half-precision values (normal, subnormal, zeros, infinities, NaNs) come back."""
    bits = np.arange(65536, dtype=np.uint16)
    halves = bits.view(np.float16)
    t = kiln.tensor(halves.astype(np.float32).tolist(), dtype=kiln.float16)
    r = _round_trip(t)
    got = np.array(r.to(kiln.float32).tolist(), dtype=np.float32).astype(np.float16)
    finite = ~np.isnan(halves)
    assert np.array_equal(got[finite].view(np.uint16), halves[finite].view(np.uint16))
    assert np.isnan(got[~finite]).all()


def test_bfloat16_every_bit_pattern():
    bits = np.arange(65536, dtype=np.uint32) << 16
    values = bits.view(np.float32)
    t = kiln.tensor(values.tolist(), dtype=kiln.float32).to(kiln.bfloat16)
    r = _round_trip(t)
    got = np.array(r.to(kiln.float32).tolist(), dtype=np.float32)
    finite = ~np.isnan(values)
    assert np.array_equal(got[finite].view(np.uint32), values[finite].view(np.uint32))
    assert np.isnan(got[~finite]).all()


def test_kiln_serialization_does_not_import_numpy():
    import subprocess
    import sys

    code = ("import sys; sys.modules['numpy'] = None; import io, kiln; b = io.BytesIO(); "
            "x = {'h': kiln.arange(5.).to(kiln.float16), 'b': kiln.arange(5.).to(kiln.bfloat16), 'i': kiln.arange(3)}; "
            "kiln.save(x, b); b.seek(0); y = kiln.load(b); "
            "assert [v.tolist() for v in y.values()] == [v.tolist() for v in x.values()]; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


def test_float16_from_bits_without_numpy():
    from kiln.serialization import _half_from_bits

    bits = np.arange(65536, dtype=np.uint16)
    halves = bits.view(np.float16)
    got = _half_from_bits(kiln.tensor(bits.view(np.int16).astype(np.int64).tolist(), dtype=kiln.int16))
    got = np.array(got.to(kiln.float32).tolist(), dtype=np.float32).astype(np.float16)
    finite = ~np.isnan(halves)
    assert np.array_equal(got[finite].view(np.uint16), halves[finite].view(np.uint16))
    assert np.isnan(got[~finite]).all()


# --- hostile files (Note [Loading hostile files] in serialization.py) ------------------------------
def _header_for(root, storages):
    return {"format": "kiln.save", "version": 1, "byteorder": "little", "storages": storages, "root": root}


def _patch_central_directory(data, entry, **fields):
    """`data` with the central-directory record of `entry` rewritten: method (offset 10), compressed
    size (20) and uncompressed size (24), each as the 2- or 4-byte little-endian field."""
    offsets = {"method": (10, 2), "compress_size": (20, 4), "file_size": (24, 4)}
    data = bytearray(data)
    pos = data.index(b"PK\x01\x02")  # the first record (stored data never holds this signature here)
    while True:
        name_len = int.from_bytes(data[pos + 28:pos + 30], "little")
        if data[pos + 46:pos + 46 + name_len] == entry.encode():
            break
        pos = data.index(b"PK\x01\x02", pos + 46)
    for field, value in fields.items():
        off, width = offsets[field]
        data[pos + off:pos + off + width] = value.to_bytes(width, "little")
    return bytes(data)


def test_compressed_entries_are_refused(tmp_path):
    # a zip bomb: 64 MiB of zeros deflate to ~64 KiB; a real one inflates 1.5 MB to 1.5 GiB
    nbytes = 64 << 20
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("kiln/header.json", json.dumps(_header_for(
            _tensor_node(shape=[nbytes // 4]), [{"dtype": "float32", "nbytes": nbytes}])))
        zf.writestr("kiln/storages/0", bytes(nbytes))
    data = buf.getvalue()
    assert len(data) < nbytes // 100
    with pytest.raises(RuntimeError, match=r"kiln.load: .*bad.kiln: entry kiln/header.json is compressed"):
        _load_bytes(data, tmp_path)
    buf = io.BytesIO()  # a stored header does not let a compressed storage through
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("kiln/header.json", json.dumps(_header_for(
            _tensor_node(shape=[nbytes // 4]), [{"dtype": "float32", "nbytes": nbytes}])))
        zf.writestr("kiln/storages/0", bytes(nbytes), compress_type=zipfile.ZIP_DEFLATED)
    with pytest.raises(RuntimeError, match=r"kiln.load: .*bad.kiln: entry kiln/storages/0 is compressed"):
        _load_bytes(buf.getvalue(), tmp_path)


@pytest.mark.parametrize("method", [8, 12, 14, 99])  # deflate, bzip2, lzma, unknown
def test_corrupted_compression_method(tmp_path, method):
    # a stored entry whose method field says it is compressed: zipfile would hand the raw bytes to
    # zlib/bz2/lzma (zlib.error, OSError, LZMAError) or raise NotImplementedError
    data = _saved_bytes({"w": kiln.arange(100.0)})
    for entry in ["kiln/header.json", "kiln/storages/0"]:
        with pytest.raises(RuntimeError, match=rf"kiln.load: .*bad.kiln: entry {entry} is compressed"):
            _load_bytes(_patch_central_directory(data, entry, method=method), tmp_path)


def test_declared_sizes_are_checked_before_allocating(tmp_path):
    import tracemalloc
    declared = 256 << 20  # an entry of 400 bytes that claims 256 MiB, consistently in header and zip
    header = _header_for(_tensor_node(shape=[declared // 4]), [{"dtype": "float32", "nbytes": declared}])
    data = _zip_with_header(header, [np.arange(100, dtype="<f4").tobytes()])
    data = _patch_central_directory(data, "kiln/storages/0", compress_size=declared, file_size=declared)
    tracemalloc.start()
    try:
        with pytest.raises(RuntimeError, match=r"kiln.load: .*bad.kiln: entry kiln/storages/0 declares 268435456 "
                                               r"bytes, more than the file holds"):
            _load_bytes(data, tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < (8 << 20), f"kiln.load allocated {peak} bytes for a file of {len(data)}"
    # the same lie about the header entry
    data = _patch_central_directory(_saved_bytes([1, 2]), "kiln/header.json", compress_size=0xF0000000,
                                    file_size=0xF0000000)
    with pytest.raises(RuntimeError, match=r"kiln.load: .*bad.kiln: entry kiln/header.json declares"):
        _load_bytes(data, tmp_path)


@pytest.mark.parametrize("shape,stride", [
    ([2 ** 32, 2 ** 32], [0, 0]),  # numel 2**64 wraps to 0 in int64
    ([2 ** 62, 4, 1], [0, 0, 0]),
    ([2 ** 63], [0]),  # one size past int64
    ([0, 2 ** 64], [1, 1]),  # numel 0, but the size itself does not fit
    ([1], [2 ** 63]),
])
def test_sizes_overflowing_int64_are_refused(tmp_path, shape, stride):
    header = _header_for(_tensor_node(shape=shape, stride=stride), [GOOD_STORAGE])
    with pytest.raises(RuntimeError, match=r"kiln.load: .*bad.kiln: .*overflow int64"):
        _load_bytes(_zip_with_header(header, [np.zeros(2, dtype="<f4").tobytes()]), tmp_path)
    if torch is not None and max(shape) < 2 ** 63 and max(stride) < 2 ** 63:  # PyTorch refuses them too
        with pytest.raises(RuntimeError, match="overflow"):
            torch.zeros(2).as_strided(shape, stride)


def test_offset_overflowing_int64_is_refused(tmp_path):
    header = _header_for(_tensor_node(shape=[0], offset=2 ** 63), [GOOD_STORAGE])
    with pytest.raises(RuntimeError, match=r"kiln.load: .*bad.kiln: .*overflow int64"):
        _load_bytes(_zip_with_header(header, [np.zeros(2, dtype="<f4").tobytes()]), tmp_path)


@pytest.mark.parametrize("depth", [100, 300, 450, 600, 1_000, 200_000])
def test_deep_nesting(tmp_path, depth):
    # Deep files stop either the JSON parser or the object decoder (where depends on the stack both
    # share); each depth either loads whole or raises kiln.load's error, never a bare RecursionError.
    for root, kind in [("[" * depth + "]" * depth, list), ('{"$tuple":[' * depth + "]}" * depth, tuple)]:
        text = '{"format":"kiln.save","version":1,"byteorder":"little","storages":[],"root":%s}' % root
        try:
            got = _load_bytes(_zip_with_header(text), tmp_path)
        except RuntimeError as e:
            assert depth >= 300 and re.match(r"kiln.load: .*bad.kiln: .*nested too deeply", str(e)), e
            continue
        for _ in range(depth - 1):
            assert type(got) is kind and len(got) == 1
            got = got[0]
        assert got == kind()


def test_every_single_byte_corruption_is_a_kiln_load_error(tmp_path):
    # each byte of a small checkpoint flipped in turn: either the load still succeeds (a timestamp, a
    # comment) and gives the saved values, or it raises kiln.load's RuntimeError, never anything else
    obj = {"w": kiln.arange(6.0).reshape(2, 3), "n": [1, (2.5, None)]}
    data = _saved_bytes(obj)
    path = tmp_path / "bad.kiln"
    errors = 0
    for pos in range(len(data)):
        for mask in (0x01, 0x80, 0xFF):
            bad = bytearray(data)
            bad[pos] ^= mask
            path.write_bytes(bytes(bad))
            try:
                got = kiln.load(path)
            except RuntimeError as e:
                assert str(e).startswith(f"kiln.load: {path}: "), (pos, mask, e)
                errors += 1
                continue
            except Exception as e:  # noqa: BLE001: the point is that nothing else escapes
                pytest.fail(f"byte {pos} ^ {mask:#x}: {type(e).__name__}: {e}")
            # a flip kiln cannot see (zip timestamps, version fields) or one that leaves valid JSON
            assert got is None or isinstance(got, (dict, list, tuple, int, float, str)), (pos, mask, got)
    assert errors > len(data)  # most flips are caught


def _nested_entries_zip(n, payload):
    """A ZIP, built by hand, whose storage entries 0..n-1 are nested: entry k's bytes are entry k+1's
    local header followed by entry k+1's bytes, so the file holds `payload` once but its entries
    hold it n times. Every CRC is right; only the overlap is wrong."""
    import struct
    names = [f"kiln/storages/{k}".encode() for k in range(n)]
    datas = [payload]  # built from the innermost entry out
    for k in range(n - 1, 0, -1):
        inner = datas[0]
        local = struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, 0, 0, 0, zlib.crc32(inner), len(inner),
                            len(inner), len(names[k]), 0) + names[k]
        datas.insert(0, local + inner)
    header = json.dumps(_header_for([_tensor_node(dtype="uint8", storage=k, shape=[len(d)]) for k, d in
                                     enumerate(datas)], [{"dtype": "uint8", "nbytes": len(d)} for d in datas]))
    entries = [(names[0], datas[0]), (b"kiln/header.json", header.encode())]
    out, central, offsets = bytearray(), bytearray(), {names[0]: 0}
    for name, data in entries:
        offsets[name] = len(out)
        out += struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, 0, 0, 0, zlib.crc32(data), len(data), len(data),
                           len(name), 0) + name + data
    offset = len(struct.pack("<4s5H3I2H", b"PK\x03\x04", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) + len(names[0])
    records = [(names[0], datas[0], 0), (b"kiln/header.json", header.encode(), offsets[b"kiln/header.json"])]
    for k in range(1, n):  # entry k's local header sits at the start of entry k-1's bytes
        records.append((names[k], datas[k], offset))
        offset += len(struct.pack("<4s5H3I2H", b"PK\x03\x04", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)) + len(names[k])
    for name, data, at in records:
        central += struct.pack("<4s6H3I5HII", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, zlib.crc32(data), len(data),
                               len(data), len(name), 0, 0, 0, 0, 0, at) + name
    end = struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, len(records), len(records), len(central), len(out), 0)
    return bytes(out + central + end)


def test_nested_entries_are_refused(tmp_path):
    payload = bytes(range(256)) * 4096  # 1 MiB
    data = _nested_entries_zip(8, payload)
    assert len(data) < 2 * len(payload)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:  # zipfile reads every entry: the CRCs are right
        assert sum(len(zf.read(i)) for i in zf.infolist() if i.filename.startswith("kiln/storages/")) > 8 * len(payload)
    with pytest.raises(RuntimeError, match=r"kiln.load: .*bad.kiln: entry kiln/storages/\d .* entries overlap"):
        _load_bytes(data, tmp_path)


def test_many_huge_sizes_fail_fast(tmp_path):
    import time
    shape = [2 ** 62] * 200_000  # the exact element count has 12 million bits
    header = _header_for(_tensor_node(shape=shape, stride=[0] * len(shape)), [GOOD_STORAGE])
    data = _zip_with_header(header, [np.zeros(2, dtype="<f4").tobytes()])
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match=r"kiln.load: .*bad.kiln: .*overflow int64"):
        _load_bytes(data, tmp_path)
    assert time.perf_counter() - start < 5.0
