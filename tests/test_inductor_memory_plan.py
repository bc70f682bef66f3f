"""kiln._C._inductor.MemoryPlanner from Python: the wrapper's memory plan over typed steps, with the
in-place analysis read from real kernel IR (inductor/memory_plan, Note [Memory plan]). The
plan's rules themselves are golden-text tests in //inductor/memory_plan:memory_plan_test; the
compiled programs that rely on them are in test_inductor.py and test_inductor_regressions.py."""
import pytest

import kiln

ind = kiln._C._inductor
kir = ind.kernel_ir
ROW = (0, [8], 1)  # element [i0, r] of a contiguous [4, 8] tensor


def kernel(out, *reads, index=ROW):
    """A kernel storing out[i] = sum of its inputs, each read at `index` (ROW: the stored element)."""
    value = kir.load(1, *index)
    for pos in range(2, len(reads) + 1):
        value = kir.op("add", value, kir.load(pos, *index))
    names = [out, *reads]
    return names, kir.Kernel("k", [(n, "f32") for n in names], [4], [kir.Loop(8, [kir.store(0, *ROW, value)])])


def planner_for(steps, static_memory=False):
    p = ind.MemoryPlanner(static_memory)
    for step in steps:
        kind, *rest = step
        if kind == "alloc":
            p.declare(rest[0], [4, 8], [8, 1], 4, "kiln.float32")
            p.alloc(rest[0])
        elif kind == "kernel":
            p.kernel(*rest)
        elif kind == "return":
            p.ret(rest[0])
    return p


def test_a_pointwise_kernel_writes_over_an_input_that_dies_in_it():
    p = planner_for([("alloc", "buf0"), ("kernel", *kernel("buf0", "arg0")),
                     ("alloc", "buf1"), ("kernel", *kernel("buf1", "buf0", "arg1")),
                     ("alloc", "buf2"), ("kernel", *kernel("buf2", "buf1")),
                     ("return", ["buf2"])])
    plan = p.plan()
    assert len(plan) == 7
    source = plan[2].alloc
    assert (source.kind, source.source, source.kernel_step, source.victim, source.store) == \
        ("in place", "buf0", 3, 1, 0)
    assert plan[0].alloc.kind == "fresh" and plan[0].alloc.source == ""
    assert plan[1].dies == ["arg0"] and plan[3].dies == ["arg1"]
    assert str(plan) == "1: del arg0\n2: in place buf0 (step 3: buffer 1 -> 0)\n3: del arg1\n"
    assert str(p).splitlines()[3] == "kernel buf1 buf0 arg1 store=0 at_store=1,2"


def test_an_input_read_at_another_element_is_not_overwritten_but_reused_later():
    shifted = (0, [1], 4)  # buf0 read transposed
    p = planner_for([("alloc", "buf0"), ("kernel", *kernel("buf0", "arg0")),
                     ("alloc", "buf1"), ("kernel", *kernel("buf1", "buf0", index=shifted)),
                     ("alloc", "buf2"), ("kernel", *kernel("buf2", "buf1", index=shifted)),
                     ("alloc", "buf3"), ("kernel", *kernel("buf3", "buf2")),
                     ("return", ["buf3"])])
    plan = p.plan()
    assert plan[2].alloc.kind == "fresh"
    assert (plan[4].alloc.kind, plan[4].alloc.source) == ("reuse", "buf0")  # dead at 3, pooled
    assert plan[6].alloc.kind == "fresh"  # buf3 is returned: neither buf2's memory nor buf1's (pooled at 5)
    assert str(p).splitlines()[3] == "kernel buf1 buf0 store=0 at_store="


def test_static_memory_and_returned_buffers():
    p = planner_for([("alloc", "buf0"), ("kernel", *kernel("buf0", "arg0")),
                     ("alloc", "buf1"), ("kernel", *kernel("buf1", "buf0")),
                     ("return", ["buf1"])], static_memory=True)
    plan = p.plan()
    assert plan.static_buffers == ["buf0"]
    assert plan[0].alloc.kind == "static" and plan[2].alloc.kind == "fresh"
    assert plan[3].dies == []  # a static buffer lives across calls


def test_bad_steps_are_typed_errors():
    p = ind.MemoryPlanner()
    p.alloc("buf0")
    p.ret(["buf0"])
    with pytest.raises(ValueError, match="buf0 is allocated but was never declared"):
        p.plan()
    with pytest.raises(ValueError, match="one stride per dimension"):
        p.declare("buf1", [4, 8], [1], 4, "kiln.float32")
    with pytest.raises(TypeError, match="incompatible function arguments"):
        p.kernel(["buf0"], [("store", 0)])
    with pytest.raises(IndexError):
        ind.MemoryPlanner().plan()[0]
