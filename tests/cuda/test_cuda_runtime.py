"""CUDA tensors, mostly without kernels: devices, copies (every dtype, layouts, conversions), fills, the
caching allocator's statistics and out-of-memory error, streams, events, pinned memory, and the
errors PyTorch raises. Values are checked against numpy and kiln's CPU results.

tests/cuda runs wherever kiln.cuda.is_available(): on the H200 (tools/gpu/test.sh, the real driver)
and, on machines without a GPU, under the fake driver of runtime/cuda/testing
(tests/test_cuda_fake_driver.py runs this folder in a subprocess with KILN_CUDA_LIB_DIR set). A test
of what only a real GPU can do (kernels) skips on the fake; one of the fake's own knobs on the GPU."""

import numpy as np
import pytest

import kiln

pytestmark = pytest.mark.skipif(not kiln.cuda.is_available(), reason="CUDA is not available "
                                "(tests/test_cuda_fake_driver.py runs these on the fake driver)")
FAKE_DRIVER = kiln.cuda.is_available() and kiln.cuda.get_device_name(0) == "kiln fake CUDA device"
# conversions and strided fills on the device are generated kernels, which the fake driver cannot run
needs_kernels = pytest.mark.skipif(FAKE_DRIVER, reason="generated kernels need the GPU (tools/gpu/test.sh)")

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool", "complex64"]


def _host(name, shape, seed=0):
    rng = np.random.default_rng(seed)
    if name == "bool":
        return kiln.tensor(rng.random(shape) > 0.5)
    if name.startswith("complex"):
        return kiln.tensor(rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).to(getattr(kiln, name))
    if name.startswith(("int", "uint")):
        return kiln.tensor(rng.integers(0, 100, shape)).to(getattr(kiln, name))
    return kiln.tensor(rng.standard_normal(shape)).to(getattr(kiln, name))


def _same(a, b):
    assert a.device.type == b.device.type == "cpu"
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    assert kiln.equal(a, b), (a, b)


def test_device_queries():
    assert kiln.cuda.device_count() >= 1
    p = kiln.cuda.get_device_properties(0)
    assert p.name == kiln.cuda.get_device_name(0) == kiln.cuda.get_device_name()
    assert (p.major, p.minor) == kiln.cuda.get_device_capability(0)
    assert p.total_memory > 0 and p.multi_processor_count > 0
    assert kiln.cuda.current_device() == 0 and kiln.cuda.is_initialized()
    free, total = kiln.cuda.mem_get_info()
    assert 0 < free <= total
    assert kiln.cuda.is_bf16_supported() == (p.major >= 8)


@pytest.mark.parametrize("name", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 5), (2, 3, 4)])
def test_round_trip_every_dtype(name, shape):
    x = _host(name, shape)
    y = x.to("cuda")
    assert y.device == kiln.device("cuda", 0) and y.is_cuda and y.dtype == x.dtype and y.shape == x.shape
    _same(y.cpu(), x)
    _same(x.cuda().to("cpu"), x)


@pytest.mark.parametrize("name", ["float32", "float16", "int64", "bool"])
def test_strided_sources_and_destinations(name):
    x = _host(name, (6, 8), seed=1)
    for view in [x.t(), x[::2, 1::3], x[:, 2], x.unsqueeze(1).expand(6, 3, 8)]:
        y = view.cuda()
        _same(y.cpu(), view.contiguous())
    y = x.cuda()
    for view in [y.t(), y[1::2, ::3], y[:, 5]]:
        _same(view.cpu(), x.t() if view.shape == (8, 6) else view.cpu())
    _same(y.t().cpu(), x.t().contiguous())
    _same(y[1::2, ::3].cpu(), x[1::2, ::3].contiguous())
    # a strided destination on the device keeps the elements between its own
    dst = _host(name, (6, 8), seed=2).cuda()
    expect = dst.cpu()
    src = _host(name, (6, 4), seed=3)
    dst[:, ::2].copy_(src)
    expect[:, ::2] = src
    _same(dst.cpu(), expect)


def test_converting_and_broadcasting_copies():
    x = _host("float32", (4, 5), seed=4)
    _same(x.to("cuda", kiln.float64).cpu(), x.double())
    _same(x.cuda().to(kiln.int32).cpu() if False else x.cuda().cpu().to(kiln.int32), x.to(kiln.int32))
    d = kiln.empty(3, 4, 5, device="cuda")
    d.copy_(x)  # broadcast from the host
    _same(d.cpu(), x.expand(3, 4, 5).contiguous())
    h = kiln.empty(4, 5, dtype=kiln.float16)
    h.copy_(x.cuda())  # device float32 to host float16
    _same(h, x.half())


@needs_kernels
def test_converting_copies_on_the_device():
    x = _host("float32", (4, 5), seed=4)
    z = kiln.zeros(4, 5, dtype=kiln.float64, device="cuda")
    z.copy_(x.cuda())  # device float32 to device float64
    _same(z.cpu(), x.double())


def test_clone_and_device_to_device():
    x = _host("float32", (3, 3), seed=5)
    y = x.cuda()
    c = y.clone()
    assert c.data_ptr() != y.data_ptr()
    _same(c.cpu(), x)
    if kiln.cuda.device_count() > 1:
        _same(y.to("cuda:1").cpu(), x)
        assert y.to("cuda:1").device == kiln.device("cuda:1")


@pytest.mark.parametrize("name,value", [("float32", 1.5), ("float64", -2.25), ("float64", 0.0), ("float16", 3.0),
                                        ("bfloat16", -1.0), ("int64", 7), ("int32", -3), ("int8", 5), ("uint8", 200),
                                        ("bool", True), ("complex64", 1 + 2j)])
def test_factories_and_fill(name, value):
    if FAKE_DRIVER and name in ("float64", "int64"):
        pytest.skip("an 8-byte fill whose two halves differ (1.0, 7) is a generated kernel, not a memset")
    dt = getattr(kiln, name)
    for make in [lambda: kiln.full((3, 4), value, dtype=dt, device="cuda"),
                 lambda: kiln.empty(3, 4, dtype=dt, device="cuda").fill_(value)]:
        _same(make().cpu(), kiln.full((3, 4), value, dtype=dt))
    _same(kiln.zeros(5, dtype=dt, device="cuda").cpu(), kiln.zeros(5, dtype=dt))
    _same(kiln.ones(2, 2, dtype=dt, device="cuda").cpu(), kiln.ones(2, 2, dtype=dt))
    if FAKE_DRIVER and not name.startswith("complex"):
        return  # a strided fill is a generated kernel (test_cuda_pointwise.py)
    # a strided fill leaves the elements between untouched
    y = kiln.zeros(4, 6, dtype=dt, device="cuda")
    y[:, 1::2].fill_(value)
    expect = kiln.zeros(4, 6, dtype=dt)
    expect[:, 1::2] = value
    _same(y.cpu(), expect)


def test_item_tolist_print_and_numpy():
    x = kiln.tensor([[1.5, -2.0], [3.0, 4.25]])
    y = x.cuda()
    assert y[1, 1].item() == 4.25 and y.tolist() == x.tolist()
    assert repr(y) == "tensor([[ 1.5000, -2.0000],\n        [ 3.0000,  4.2500]], device='cuda:0')"
    with pytest.raises(TypeError, match=r"can't convert cuda:0 device type tensor to numpy\. Use Tensor\.cpu\(\)"):
        y.numpy()


def test_caching_allocator_statistics():
    kiln.cuda.synchronize()
    kiln.cuda.empty_cache()
    base = kiln.cuda.memory_allocated()
    kiln.cuda.reset_peak_memory_stats()
    a = kiln.empty(1000, device="cuda")  # 4000 bytes: one 4096-byte block (512-byte rounding)
    assert kiln.cuda.memory_allocated() == base + 4096
    b = kiln.empty(3 * 2 ** 20, dtype=kiln.uint8, device="cuda")  # a large-pool block
    assert kiln.cuda.memory_allocated() == base + 4096 + 3 * 2 ** 20
    assert kiln.cuda.memory_reserved() >= kiln.cuda.memory_allocated()
    peak = kiln.cuda.max_memory_allocated()
    assert peak == base + 4096 + 3 * 2 ** 20
    a_ptr = a.data_ptr()
    del a
    assert kiln.cuda.memory_allocated() == base + 3 * 2 ** 20
    c = kiln.empty(1000, device="cuda")
    assert c.data_ptr() == a_ptr  # the freed block comes back without a driver call
    del b, c
    assert kiln.cuda.memory_allocated() == base and kiln.cuda.max_memory_allocated() == peak
    kiln.cuda.empty_cache()
    if base == 0:
        assert kiln.cuda.memory_reserved() == 0
    stats = kiln.cuda.memory_stats()
    assert stats["allocation.all.allocated"] >= 3 and stats["num_ooms"] == 0
    assert "Allocated memory" in kiln.cuda.memory_summary()
    assert isinstance(kiln.cuda.memory_snapshot(), list)


def test_out_of_memory_is_typed_and_leaves_state_unchanged():
    before = kiln.cuda.memory_allocated()
    total = kiln.cuda.get_device_properties(0).total_memory
    with pytest.raises(kiln.cuda.OutOfMemoryError, match=r"CUDA out of memory\. Tried to allocate .* GPU 0 has a "
                       r"total capacity of .* of which .* is free\."):
        kiln.empty(2 * total, dtype=kiln.uint8, device="cuda")
    assert issubclass(kiln.cuda.OutOfMemoryError, RuntimeError)
    assert kiln.cuda.memory_allocated() == before
    assert kiln.cuda.memory_stats()["num_ooms"] >= 1
    kiln.ones(10, device="cuda")  # still usable


def test_streams_and_events():
    default = kiln.cuda.current_stream()
    assert default == kiln.cuda.default_stream() and default.cuda_stream == 0
    s = kiln.cuda.Stream()
    assert s != default and s.device == kiln.device("cuda:0")
    with kiln.cuda.stream(s):
        assert kiln.cuda.current_stream() == s
        x = kiln.ones(1000, device="cuda")
        x.fill_(2.0)
    assert kiln.cuda.current_stream() == default
    default.wait_stream(s)
    assert x.cpu().sum().item() == 2000.0
    hi = kiln.cuda.Stream(priority=-1)
    assert hi.priority == -1
    start, end = kiln.cuda.Event(enable_timing=True), kiln.cuda.Event(enable_timing=True)
    start.record()
    kiln.ones(2 ** 20, device="cuda").fill_(3.0)
    end.record()
    end.synchronize()
    assert start.query() and end.query() and start.elapsed_time(end) >= 0
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        kiln.cuda.Event().elapsed_time(end)
    s.synchronize()
    assert s.query()
    kiln.cuda.synchronize()


def test_record_stream_defers_reuse():
    s = kiln.cuda.Stream()
    x = kiln.empty(256, device="cuda")
    ptr = x.data_ptr()
    x.record_stream(s)
    s.synchronize()
    del x
    y = kiln.empty(256, device="cuda")  # s's work is done: the block may come back
    assert y.data_ptr() == ptr


def test_pinned_memory_and_non_blocking_copies():
    x = _host("float32", (64, 64), seed=6)
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned() and p.pin_memory() is p
    _same(p, x)
    y = p.to("cuda", non_blocking=True)
    back = kiln.empty(64, 64).pin_memory()
    back.copy_(y, non_blocking=True)
    kiln.cuda.synchronize()
    _same(back, x)


def test_errors_name_the_op_and_the_device():
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        kiln.ones(1, device=f"cuda:{kiln.cuda.device_count()}")
    # every op has a CUDA kernel; dtypes a kernel lacks (complex log1p, as on the CPU) are refused by
    # name before any launch
    z = kiln.complex(kiln.ones(2), kiln.ones(2)).cuda()
    with pytest.raises(NotImplementedError, match="\"log1p\" not implemented for 'ComplexFloat'"):
        kiln.log1p(z)


def test_fake_driver_has_no_kernels():
    if not FAKE_DRIVER:
        pytest.skip("the real driver runs kernels")
    assert kiln.cuda.get_device_properties(0).total_memory == 1 << 30


def test_save_and_load_keep_the_device_or_map_it(tmp_path):
    x = _host("float32", (4, 6), seed=7).cuda()
    v = x[1:, ::2]  # a view: saved with its storage, loaded as a view again
    path = tmp_path / "t.pt"
    kiln.save({"x": x, "v": v, "h": x[0].cpu()}, path)
    back = kiln.load(path)
    assert back["x"].device == kiln.device("cuda:0") and back["h"].device.type == "cpu"
    _same(back["x"].cpu(), x.cpu())
    _same(back["v"].cpu(), v.cpu())
    assert back["v"].untyped_storage().data_ptr() == back["x"].untyped_storage().data_ptr()
    on_cpu = kiln.load(path, map_location="cpu")
    assert on_cpu["x"].device.type == "cpu"
    _same(on_cpu["v"], v.cpu())


def test_legacy_cuda_type_names_convert():
    x = kiln.tensor([1.5, 2.0])
    y = x.type("torch.cuda.FloatTensor")
    assert y.device == kiln.device("cuda:0") and y.dtype == kiln.float32
    assert x.type("kiln.cuda.DoubleTensor").dtype == kiln.float64


def test_a_tensor_initializes_cuda_for_the_statistics():
    """In a fresh process, a CUDA tensor alone initializes CUDA: is_initialized() and the allocator's
    statistics see it (they used to wait for an explicit kiln.cuda call and reported 0)."""
    import os
    import subprocess
    import sys

    code = ("import kiln; assert not kiln.cuda.is_initialized(); x = kiln.ones(1000, device='cuda'); "
            "assert kiln.cuda.is_initialized(); print(kiln.cuda.memory_allocated(), kiln.cuda.memory_reserved())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    allocated, reserved = map(int, out.stdout.split())
    assert allocated == 4096 and reserved >= allocated


def test_generated_kernels_say_when_nvjitlink_is_missing():
    if not FAKE_DRIVER or kiln._C._cuda_nvjitlink_available():
        pytest.skip("nvJitLink is there: the kernels compile (test_cuda_pointwise.py)")
    with pytest.raises(RuntimeError, match=r"\[add\] kiln generates its CUDA kernels at run time and compiles them "
                                           r"with nvJitLink \(libnvJitLink.so.13\), which was not found"):
        kiln.ones(3, device="cuda") + 1


def test_host_computed_factories_on_the_device():
    # arange, eye and linspace compute their values on the host: on CUDA they are copied over (their
    # loops wrote device memory through a host pointer: a segfault on the GPU)
    for dev in [kiln.arange(10, device="cuda"), kiln.arange(1, 4, 0.5, dtype=kiln.float64, device="cuda")]:
        assert dev.is_cuda
    _same(kiln.arange(10, device="cuda").cpu(), kiln.arange(10))
    _same(kiln.arange(1, 4, 0.5, dtype=kiln.float64, device="cuda").cpu(), kiln.arange(1, 4, 0.5, dtype=kiln.float64))
    _same(kiln.eye(3, 5, device="cuda").cpu(), kiln.eye(3, 5))
    _same(kiln.linspace(-1, 1, 7, device="cuda").cpu(), kiln.linspace(-1, 1, 7))
    x = kiln.ones(3, device="cuda")
    x.resize_(1000)  # grows on the device, keeping its first elements
    assert x.is_cuda and x.shape == (1000,)
    _same(x[:3].cpu(), kiln.ones(3))


def test_module_to_cuda_moves_parameters_in_place():
    """model.to("cuda") keeps each parameter's identity (param.data = param.cuda(), as PyTorch's
    Module._apply), so an optimizer built before still holds the model's parameters; gradients move
    with them, and the way back works alike."""
    m = kiln.nn.Linear(4, 3)
    w, b = m.weight, m.bias
    want = w.detach().clone()
    w.grad = kiln.ones(3, 4)
    opt = kiln.optim.SGD(m.parameters(), lr=0.1)
    assert m.to("cuda") is m
    assert m.weight is w and m.bias is b and opt.param_groups[0]["params"][0] is w
    assert w.device.type == "cuda" and b.device.type == "cuda" and w.grad.device.type == "cuda"
    assert w.is_leaf and w.requires_grad and w.grad_fn is None
    np.testing.assert_array_equal(w.detach().cpu().numpy(), want.numpy())
    np.testing.assert_array_equal(w.grad.cpu().numpy(), np.ones((3, 4), np.float32))
    w.grad = kiln.zeros(3, 4, device="cuda")  # a gradient on the parameter's new device is accepted
    with pytest.raises(RuntimeError, match="device"):
        w.grad = kiln.zeros(3, 4)
    m.cpu()
    assert m.weight is w and w.device.type == "cpu" and w.grad.device.type == "cpu"
    np.testing.assert_array_equal(w.detach().numpy(), want.numpy())
    with pytest.raises(RuntimeError, match="incompatible tensor type"):
        w.data = kiln.empty(3, 4, device="meta")


def test_fill_a_host_tensor_with_a_device_value():
    """x.fill_(v) with x on the CPU and v a 0-d CUDA tensor fills on the CPU (PyTorch reads v)."""
    x = kiln.zeros(3)
    assert x.fill_(kiln.tensor(5.0).cuda()) is x
    _same(x, kiln.full((3,), 5.0))
    c = kiln.zeros(2, dtype=kiln.complex64)
    c.fill_(kiln.tensor(1 + 2j).cuda())
    _same(c, kiln.full((2,), 1 + 2j, dtype=kiln.complex64))


# Found on the H200: a CPU kernel given a CUDA operand read device memory on the host and crashed
# the process (a segfault). Each of these raises PyTorch's RuntimeError now, before any kernel runs;
# tests/test_cuda_fake_driver.py runs this file with the fake's device memory unreadable from the host
# (KILN_FAKE_CUDA_GUARD_MEMORY=1), so a host read anywhere here crashes there as on a GPU.
DEVICE_MISMATCHES = [
    ("cpu.add_(cuda)", lambda a, b: a.add_(b), "same device"),
    ("cpu.mul_(cuda 0-d)", lambda a, b: a.mul_(b[0]), "same device"),
    ("cpu.clamp_(min=cuda)", lambda a, b: a.clamp_(min=b), "same device"),
    ("cpu.clamp(max=cuda)", lambda a, b: a.clamp(max=b), "same device"),
    ("add(cuda, cuda, out=cpu)", lambda a, b: kiln.add(b, b, out=a), "Expected out tensor to have device cuda:0"),
    ("add(cpu, cpu, out=cuda)", lambda a, b: kiln.add(a, a, out=b), "Expected out tensor to have device cpu"),
    ("cpu.index_add_(cuda index)", lambda a, b: a.index_add_(0, kiln.tensor([0, 1], device="cuda"), b[:2]),
     "same device"),
    ("cpu.scatter_(cuda src)", lambda a, b: a.scatter_(0, kiln.tensor([0]), b[:1]), "same device"),
    ("cpu.gather(cuda index)", lambda a, b: a.gather(0, kiln.tensor([0], device="cuda")), "same device"),
    ("cpu[cpu index] = cuda", lambda a, b: a.index_put_((kiln.tensor([0]),), b[:1]), "same device"),
    ("cpu[cuda index] = cpu", lambda a, b: a.index_put_((kiln.tensor([0], device="cuda"),), a[:1]),
     "indices should be either on cpu or on the same device"),
    ("cpu.index_copy_(cuda src)", lambda a, b: a.index_copy_(0, kiln.tensor([0]), b[:1]), "same device"),
]


@pytest.mark.parametrize("name,fn,message", DEVICE_MISMATCHES, ids=[c[0] for c in DEVICE_MISMATCHES])
def test_cpu_kernels_refuse_cuda_operands(name, fn, message):
    a, b = kiln.ones(3), kiln.ones(3, device="cuda")
    with pytest.raises(RuntimeError, match=message):
        fn(a, b)
    assert kiln.equal(a, kiln.ones(3))  # nothing written


def test_gradient_returns_to_the_leafs_device():
    """x.cuda()'s backward brings the gradient back to the CPU leaf (PyTorch's _to_copy_backward); it
    reached the leaf's AccumulateGrad on CUDA, whose CPU add read it on the host (a segfault in
    tests/cuda/test_cuda_attention.py's MultiheadAttention test, whose input had been a CPU leaf)."""
    x = kiln.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x.cuda().backward(kiln.tensor([1.0, 2.0, 4.0], device="cuda"))
    assert x.grad.device.type == "cpu" and x.grad.tolist() == [1.0, 2.0, 4.0]
    x.cuda().backward(kiln.tensor([1.0, 1.0, 1.0], device="cuda"))  # accumulates on the CPU
    assert x.grad.tolist() == [2.0, 3.0, 5.0]
    y = kiln.tensor([1.0, 2.0], device="cuda", requires_grad=True)
    y.cpu().backward(kiln.tensor([3.0, 5.0]))
    assert y.grad.device.type == "cuda" and y.grad.cpu().tolist() == [3.0, 5.0]
