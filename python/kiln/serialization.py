"""kiln.save / kiln.load: kiln's own checkpoint format (specified in serialization.md).

A file is a ZIP archive (entries stored, not compressed) holding `kiln/header.json`, a JSON
description of the saved object tree, and one entry `kiln/storages/<i>` of raw little-endian bytes
per tensor storage. Tensors record dtype, shape, strides and storage offset, and tensors that share
a storage (views) share one entry, so views are views again after loading. Loading parses JSON and
copies bytes: nothing in a file is ever executed or imported (no pickle). Every entry carries the ZIP
CRC-32, so truncated or corrupted files fail with a RuntimeError that names the file.

Note [Loading hostile files]: a checkpoint may come from anywhere, so every size, count and nesting
depth the file declares is checked against the file itself before anything is allocated for it.
Entries must be stored: a compressed entry could inflate a small file a thousandfold (a zip bomb),
so it is refused rather than bounded. An entry's declared size must fit inside the file, and all
entries read together too (entries nested inside one another would read it many times); a tensor's
element count must fit in int64. Whatever goes wrong, the caller sees one
`RuntimeError("kiln.load: <file>: ...")`, never zlib's, zipfile's or a bare RecursionError.
"""

import collections
import json
import math
import os
import sys
import zipfile
import zlib

import kiln
from kiln import Tensor, _C

__all__ = ["save", "load"]

FORMAT = "kiln.save"
VERSION = 1
_HEADER = "kiln/header.json"
_STORAGE = "kiln/storages/{}"
_INT64_MAX = 2 ** 63 - 1
# What a damaged archive can raise from zipfile while an entry is opened or read (zlib.error and
# NotImplementedError cannot happen for stored entries, but stay caught should a check be missed).
_READ_ERRORS = (zipfile.BadZipFile, EOFError, OSError, ValueError, zlib.error, NotImplementedError)

_DTYPES = {name: getattr(kiln, name) for name in
           ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64")}
_FORMAT = {"bool": "?", "uint8": "B", "int8": "b", "int16": "h", "int32": "i", "int64": "q", "float16": "e",
           "float32": "f", "float64": "d"}  # buffer-protocol formats (bfloat16 has none)
_ITEMSIZE = {"bool": 1, "uint8": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8, "float16": 2, "bfloat16": 2,
             "float32": 4, "float64": 8}


def _dtype_name(dtype):
    return str(dtype).split(".")[-1]


def _file_name(f):
    if isinstance(f, (str, bytes, os.PathLike)):
        return os.fsdecode(f)
    return getattr(f, "name", None) or repr(f)


# --- saving ---------------------------------------------------------------------------------------
class _Saver:
    def __init__(self):
        self.groups = {}  # (storage address, dtype name) -> storage index
        self.storages = []  # [tensor, dtype name, nbytes]

    def storage_of(self, t):
        """Index of t's storage entry; grows the entry to cover every byte t reaches."""
        name = _dtype_name(t.dtype)
        itemsize = _ITEMSIZE[name]
        key = (t._storage_data_ptr(), t._device_str, name)
        end = 0
        if t.numel() > 0:
            end = (t.storage_offset() + 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride()))) * itemsize
        index = self.groups.get(key)
        if index is None:
            index = self.groups[key] = len(self.storages)
            self.storages.append([t, name, end])
        elif end > self.storages[index][2]:
            self.storages[index][0], self.storages[index][2] = t, end
        return index

    def encode(self, obj, path):
        if obj is None or isinstance(obj, (bool, str)):
            return obj
        if isinstance(obj, int):
            return obj
        if isinstance(obj, float):
            if math.isfinite(obj):
                return obj
            return {"$float": "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")}
        if isinstance(obj, Tensor):
            spec = {"storage": self.storage_of(obj), "dtype": _dtype_name(obj.dtype), "shape": list(obj.shape),
                    "stride": list(obj.stride()), "offset": obj.storage_offset(),
                    "requires_grad": bool(obj.requires_grad)}
            if obj.device.type != "cpu":
                spec["device"] = str(obj.device)
            if type(obj).__name__ == "Parameter":
                spec["parameter"] = True
            return {"$tensor": spec}
        if isinstance(obj, kiln.dtype):
            return {"$dtype": _dtype_name(obj)}
        if isinstance(obj, kiln.Size):
            return {"$size": [int(s) for s in obj]}
        if type(obj) in (dict, collections.OrderedDict, collections.defaultdict, collections.Counter):
            kind = {collections.OrderedDict: "$odict", collections.Counter: "$counter"}.get(type(obj), "$dict")
            return {kind: [[self.encode(k, f"{path} (a key)"), self.encode(v, f"{path}[{k!r}]")]
                           for k, v in obj.items()]}
        if type(obj) is list:
            return [self.encode(v, f"{path}[{i}]") for i, v in enumerate(obj)]
        if type(obj) is tuple:
            return {"$tuple": [self.encode(v, f"{path}[{i}]") for i, v in enumerate(obj)]}
        raise TypeError(f"kiln.save: cannot save an object of type {type(obj).__module__}.{type(obj).__qualname__} "
                        f"(at {path}); kiln's format holds dicts, OrderedDicts, Counters, lists, tuples, str, int, float, "
                        f"bool, None, dtypes and tensors")

    def storage_bytes(self, index):
        t, name, nbytes = self.storages[index]
        if nbytes == 0:
            return b""
        flat = t.as_strided((nbytes // _ITEMSIZE[name],), (1,), 0)
        if flat.device.type != "cpu":  # the whole storage comes over once, so views stay views
            flat = flat.cpu()
        if name == "bfloat16":  # no buffer format for bfloat16: its bits are the top half of float32's
            f32 = bytes(memoryview(flat.to(kiln.float32)).cast("B"))
            out = bytearray(nbytes)
            out[0::2] = f32[2::4]
            out[1::2] = f32[3::4]
            return out
        return memoryview(flat).cast("B")


def save(obj, f, pickle_module=None, pickle_protocol=None, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Saves `obj` (nested dicts/OrderedDicts/lists/tuples of tensors, numbers, strings, None) to `f`,
    a path or a writable binary file object, in kiln's format (see kiln/serialization.md)."""
    if sys.byteorder != "little":
        raise RuntimeError("kiln.save: big-endian hosts are not supported")
    saver = _Saver()
    root = saver.encode(obj, "obj")
    header = {"format": FORMAT, "version": VERSION, "byteorder": "little", "root": root,
              "storages": [{"dtype": name, "nbytes": nbytes} for _, name, nbytes in saver.storages]}
    opened = isinstance(f, (str, bytes, os.PathLike))
    stream = open(f, "wb") if opened else f
    try:
        with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
            zf.writestr(_HEADER, json.dumps(header, allow_nan=False, separators=(",", ":")))
            for i in range(len(saver.storages)):
                zf.writestr(_STORAGE.format(i), saver.storage_bytes(i))
    finally:
        if opened:
            stream.close()


# --- loading --------------------------------------------------------------------------------------
class _Entries:
    """Reads a checkpoint's stored entries, each only after its declared size and layout are known to
    be safe: stored (not compressed or encrypted), inside the file, and, all entries read so far
    together, no larger than the file. Entries in a valid archive hold disjoint bytes, so the last
    check refuses entries nested inside one another, which would let a small file be read (and
    allocated) many times over."""

    def __init__(self, zf, file_size, fail):
        self.zf, self.file_size, self.fail = zf, file_size, fail
        self.budget = file_size  # bytes of entry data the file can still hold

    def info(self, entry):
        """The ZipInfo of `entry` once its sizes are checked; None if the archive has no such entry."""
        try:
            info = self.zf.getinfo(entry)
        except KeyError:
            return None
        if info.compress_type != zipfile.ZIP_STORED:
            self.fail(f"entry {entry} is compressed (method {info.compress_type}); kiln checkpoints store entries "
                      f"uncompressed, and a compressed entry could inflate without bound")
        if info.flag_bits & 0x1:
            self.fail(f"entry {entry} is encrypted")
        if info.compress_size != info.file_size or info.header_offset + info.compress_size > self.file_size:
            self.fail(f"entry {entry} declares {info.file_size} bytes, more than the file holds ({self.file_size} "
                      f"bytes); the file is truncated or corrupted")
        return info

    def read(self, info, nbytes):
        """Exactly `nbytes` (== info.file_size) bytes of the entry, checked against its CRC-32."""
        if nbytes > self.budget:
            self.fail(f"entry {info.filename} ({nbytes} bytes) and the entries read before it hold more bytes than "
                      f"the file ({self.file_size} bytes): entries overlap, the file is corrupted")
        self.budget -= nbytes
        buf = bytearray(nbytes)
        try:
            with self.zf.open(info) as member:
                got = member.readinto(buf)
                if got != nbytes or member.read(1):
                    self.fail(f"entry {info.filename} is truncated ({got} of {nbytes} bytes)")
        except _READ_ERRORS as e:
            self.fail(f"entry {info.filename} cannot be read ({e}); the file is truncated or corrupted")
        return buf


class _Loader:
    def __init__(self, entries, header, name, map_location):
        self.entries, self.name, self.map_location = entries, name, map_location
        self.specs = header["storages"]
        self.flats = {}

    def fail(self, what):
        raise RuntimeError(f"kiln.load: {self.name}: {what}")

    def flat(self, index, device="cpu"):
        """Storage `index` as a flat 1-D tensor of its dtype on `device`, read (and moved) once."""
        if (index, device) in self.flats:
            return self.flats[(index, device)]
        if device != "cpu":
            flat = self.flat(index)
            try:
                t = flat.to(device)
            except (RuntimeError, NotImplementedError, ValueError) as e:  # a device this build lacks
                self.fail(f"storage {index} cannot be loaded on {device!r} ({e}); pass map_location='cpu'")
            self.flats[(index, device)] = t
            return t
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(self.specs):
            self.fail(f"a tensor refers to storage {index!r}, but the file has {len(self.specs)} storages")
        spec = self.specs[index]
        if not isinstance(spec, dict) or spec.get("dtype") not in _DTYPES or not _is_count(spec.get("nbytes")):
            self.fail(f"storage {index} has a bad description {spec!r}")
        name, nbytes = spec["dtype"], spec["nbytes"]
        if nbytes % _ITEMSIZE[name]:
            self.fail(f"storage {index} holds {nbytes} bytes, not a whole number of {name} elements")
        info = self.entries.info(_STORAGE.format(index))
        if info is None:
            self.fail(f"the entry for storage {index} is missing")
        if info.file_size != nbytes:
            self.fail(f"storage {index} should hold {nbytes} bytes, its entry holds {info.file_size}")
        buf = self.entries.read(info, nbytes)
        dtype = _DTYPES[name]
        if nbytes == 0:
            t = kiln.empty(0, dtype=dtype)
        elif name == "bfloat16":  # bfloat16 bits become the top half of float32s, then convert exactly
            f32 = bytearray(2 * nbytes)
            f32[2::4] = buf[0::2]
            f32[3::4] = buf[1::2]
            t = _C._from_buffer(memoryview(f32).cast("f")).to(dtype)
        elif name == "float16" and sys.version_info < (3, 12):  # memoryview.cast("e") needs 3.12
            t = _half_from_buffer(buf)
        else:
            t = _C._from_buffer(memoryview(buf).cast(_FORMAT[name]))
        self.flats[(index, "cpu")] = t
        return t

    def tensor(self, spec):
        if not isinstance(spec, dict):
            self.fail(f"bad tensor description {spec!r}")
        device = spec.get("device", "cpu")
        if not isinstance(device, str):
            self.fail(f"bad tensor device {device!r}")
        if self.map_location is not None:
            device = _map(self.map_location, device)
        for flag in ("requires_grad", "parameter"):
            if not isinstance(spec.get(flag, False), bool):
                self.fail(f"bad tensor {flag} {spec[flag]!r}")
        flat = self.flat(spec.get("storage"), str(device))
        shape, stride, offset = spec.get("shape"), spec.get("stride"), spec.get("offset")
        dtype = spec.get("dtype")
        if dtype != self.specs[spec["storage"]]["dtype"]:
            self.fail(f"a tensor of dtype {dtype!r} refers to a {self.specs[spec['storage']]['dtype']} storage")
        if (not isinstance(shape, list) or not isinstance(stride, list) or len(shape) != len(stride)
                or not all(_is_count(v) for v in shape + stride) or not _is_count(offset)):
            self.fail(f"bad tensor geometry shape={shape!r} stride={stride!r} offset={offset!r}")
        if max(shape + stride + [offset]) > _INT64_MAX or _numel_overflows(shape):  # int64, as in PyTorch
            self.fail(f"a tensor of shape {shape} stride {stride} offset {offset} has sizes or an element count "
                      f"that overflow int64")
        numel = math.prod(shape)
        if numel > 0:
            last = offset + sum((s - 1) * st for s, st in zip(shape, stride))
            if last >= flat.numel():
                self.fail(f"a tensor of shape {shape} stride {stride} offset {offset} reaches element {last}, "
                          f"past the end of its storage ({flat.numel()} elements)")
        if offset == 0 and numel == flat.numel() and list(_contiguous_strides(shape)) == stride and shape == [numel]:
            t = flat
        else:
            t = flat.as_strided(shape, stride, offset)
        if spec.get("requires_grad") and not t.is_floating_point():
            self.fail(f"a tensor of dtype {dtype} requires grad; only floating point tensors can")
        if spec.get("parameter"):
            nn = getattr(kiln, "nn", None)
            if nn is not None and hasattr(nn, "Parameter"):
                return nn.Parameter(t, requires_grad=bool(spec.get("requires_grad")))
        if spec.get("requires_grad"):
            t.requires_grad_(True)
        return t

    def decode(self, node):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.decode(v) for v in node]
        if isinstance(node, dict) and len(node) == 1:
            (kind, value), = node.items()
            if kind == "$tensor":
                return self.tensor(value)
            if kind == "$tuple" and isinstance(value, list):
                return tuple(self.decode(v) for v in value)
            if kind in ("$dict", "$odict", "$counter") and isinstance(value, list):
                out = {"$dict": dict, "$odict": collections.OrderedDict, "$counter": collections.Counter}[kind]()
                for item in value:
                    if not isinstance(item, list) or len(item) != 2:
                        self.fail(f"bad dict item {item!r}")
                    key = self.decode(item[0])
                    try:
                        out[key] = self.decode(item[1])
                    except TypeError:
                        self.fail(f"unhashable dict key {key!r}")
                return out
            if kind == "$float" and value in ("nan", "inf", "-inf"):
                return float(value)
            if kind == "$dtype" and value in _DTYPES:
                return _DTYPES[value]
            if kind == "$size" and isinstance(value, list) and all(_is_count(v) and v <= _INT64_MAX for v in value):
                return kiln.Size(value)
        self.fail(f"unknown node {str(node)[:80]!r} in the header")


def _half_from_buffer(buf):
    """A float16 tensor over `buf` on Python 3.11: numpy (when installed) exports the "e" format
    that memoryview cannot cast to before 3.12; without numpy the values are rebuilt from their bits."""
    try:
        import numpy as np
    except ImportError:
        return _half_from_bits(_C._from_buffer(memoryview(buf).cast("h")))
    return _C._from_buffer(np.frombuffer(buf, dtype="<f2"))


def _half_from_bits(h16):
    """float16 values from their IEEE bit patterns (an int16 tensor), with kiln ops: each half is
    rebuilt as the float32 of the same value (exact), then converted."""
    h = h16.to(kiln.int64).bitwise_and(0xFFFF)
    sign, exponent, mantissa = h.bitwise_right_shift(15), h.bitwise_right_shift(10).bitwise_and(0x1F), \
        h.bitwise_and(0x3FF)
    top = sign.bitwise_left_shift(31).bitwise_or(mantissa.bitwise_left_shift(13))
    biased = kiln.where(exponent == 31, kiln.full_like(exponent, 0xFF), exponent + 112)
    bits = top.bitwise_or(biased.bitwise_left_shift(23))  # normal numbers, infinities and NaNs
    raw = bytes(memoryview(bits).cast("B"))
    low = bytearray(4 * h.numel())  # the low 4 bytes of each little-endian int64 are the float32
    for k in range(4):
        low[k::4] = raw[k::8]
    normal = _C._from_buffer(memoryview(low).cast("f"))
    subnormal = mantissa.to(kiln.float32) * 2.0 ** -24 * (1 - 2 * sign).to(kiln.float32)  # also +-0
    return kiln.where(exponent == 0, subnormal, normal).to(kiln.float16)


def _numel_overflows(shape):
    """Whether the product of `shape` passes int64, found without forming it: a file can list
    thousands of sizes near 2**63, whose exact product would take minutes to compute."""
    if 0 in shape:
        return False
    numel = 1
    for s in shape:
        numel *= s
        if numel > _INT64_MAX:
            return True
    return False


def _is_count(v):
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _contiguous_strides(shape):
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= max(s, 1)
    return reversed(strides)


def _map(map_location, device):
    """The device a tensor saved on `device` loads to."""
    if callable(map_location):
        raise NotImplementedError("kiln.load: a callable map_location is not supported")
    if isinstance(map_location, dict):
        return map_location.get(device, device)
    return str(map_location)


def load(f, map_location=None, *, weights_only=True, mmap=None, **kwargs):
    """Loads an object saved by kiln.save from `f` (a path or a readable, seekable binary file).
    The format holds only data, so loading is always safe (weights_only is accepted and ignored)."""
    name = _file_name(f)
    opened = isinstance(f, (str, bytes, os.PathLike))
    try:
        stream = open(f, "rb") if opened else f
    except OSError:
        raise
    def fail(what):
        raise RuntimeError(f"kiln.load: {name}: {what}")

    try:
        try:
            start = stream.tell()
            file_size = stream.seek(0, os.SEEK_END)
            stream.seek(start)
            zf = zipfile.ZipFile(stream, "r")
        except _READ_ERRORS + (OverflowError,) as e:
            raise RuntimeError(f"kiln.load: {name}: not a kiln checkpoint, or truncated/corrupted ({e})") from None
        with zf:
            entries = _Entries(zf, file_size, fail)
            info = entries.info(_HEADER)
            if info is None:
                fail(f"not a kiln checkpoint (no {_HEADER} entry)")
            raw = entries.read(info, info.file_size)
            try:
                header = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as e:
                raise RuntimeError(f"kiln.load: {name}: the header is not valid JSON ({e})") from None
            except RecursionError:
                raise RuntimeError(f"kiln.load: {name}: the header's JSON is nested too deeply") from None
            if not isinstance(header, dict) or header.get("format") != FORMAT:
                raise RuntimeError(f"kiln.load: {name}: not a kiln checkpoint (header format is "
                                   f"{header.get('format') if isinstance(header, dict) else header!r:.40})")
            if header.get("version") != VERSION:
                raise RuntimeError(f"kiln.load: {name}: format version {header.get('version')!r} is not supported "
                                   f"(this kiln reads version {VERSION})")
            if header.get("byteorder") != "little" or not isinstance(header.get("storages"), list) \
                    or "root" not in header:
                raise RuntimeError(f"kiln.load: {name}: the header lacks 'byteorder', 'storages' or 'root'")
            loader = _Loader(entries, header, name, map_location)
            try:
                return loader.decode(header["root"])
            except RecursionError:
                raise RuntimeError(f"kiln.load: {name}: the object tree is nested too deeply") from None
    finally:
        if opened:
            stream.close()
