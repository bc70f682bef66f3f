"""Deliberate compiler bugs for testing kiln._dynamo.bisect and the repro writers (tests only).

KILN_TEST_SEEDED_BUG=<name>[,<name>...] installs them when kiln._inductor is imported; nothing
else reads the variable, and without it this module changes nothing. Each bug sits in the part
of the compiler the bisector must name:

    lowering        aten.relu's lowering adds 0.5 (wrong result; found among "lowerings")
    lowering_crash  aten.sin's lowering raises an internal AssertionError (a crash, same place)
    fusion          a kernel fusing a relu with another op adds 1 to what it stores (found as
                    "fusion"; a relu in a kernel of its own is right)
    pass_crash      the backward pass contiguous_transposed_products raises (found as "passes")
    decomposition   Inductor's layer-norm decomposition scales its result by 1.5 (found by the
                    aot_eager_decomp_partition backend, among "decomposition")
"""

import os

ENV = "KILN_TEST_SEEDED_BUG"
NAMES = ("lowering", "lowering_crash", "fusion", "pass_crash", "decomposition")


def active():
    names = {n.strip() for n in os.environ.get(ENV, "").split(",") if n.strip()}
    unknown = names - set(NAMES)
    if unknown:
        raise ValueError(f"{ENV}: unknown seeded bug(s) {sorted(unknown)}; known: {', '.join(NAMES)}")
    return names


def install():
    names = active()
    if not names:
        return
    import kiln
    from kiln._C._inductor import kernel_ir as kir
    from kiln._C._inductor.kernel_ir import ops

    aten = kiln.ops.aten
    if "lowering" in names:
        from kiln._inductor.lowering import OVERRIDES, pointwise

        def wrong_relu(out, x):
            return pointwise("relu", out, [x], lambda a: ops.add(ops.relu(a), kir.const(0.5, _ir_dtype(out))))

        OVERRIDES[aten.relu.default] = wrong_relu
    if "lowering_crash" in names:
        from kiln._inductor.lowering import OVERRIDES

        def crashing_sin(out, x):
            raise AssertionError("seeded bug: the sin lowering crashed")

        OVERRIDES[aten.sin.default] = crashing_sin
    if "fusion" in names:
        from kiln._inductor.graph import GraphLowering

        make_kernel = GraphLowering._kernel

        def wrong_fused_kernel(self, formed):
            kernel = make_kernel(self, formed)
            if "relu" in kernel.ops and len(kernel.ops) >= 2:
                ir = kernel.ir
                loops = [kir.Loop(loop.extent, [_plus_one(stmt, kernel) for stmt in loop.stmts]) for loop in ir.loops]
                kernel.rewrite(kir.Kernel(ir.name, ir.buffers, ir.outer, loops), kernel.buffers)
            return kernel

        GraphLowering._kernel = wrong_fused_kernel
    if "pass_crash" in names:
        from kiln._inductor import fx_passes

        def crashing_pass(gm):
            raise AssertionError("seeded bug: the contiguous_transposed_products pass crashed")

        fx_passes.POST_GRAD_PASSES[:] = [(name, crashing_pass if name == "contiguous_transposed_products" else run,
                                          kinds) for name, run, kinds in fx_passes.POST_GRAD_PASSES]
    if "decomposition" in names:
        from kiln._inductor import decomposition

        right = decomposition.DECOMPOSITIONS[aten.native_layer_norm.default]

        def wrong_layer_norm(*args, **kwargs):
            out, mean, rstd = right(*args, **kwargs)
            return aten.mul.Tensor(out, 1.5), mean, rstd

        decomposition.DECOMPOSITIONS[aten.native_layer_norm.default] = wrong_layer_norm


def _ir_dtype(t):
    from kiln._inductor.ir import ir_dtype

    return ir_dtype(t.dtype)


def _plus_one(stmt, kernel):
    from kiln._C._inductor import kernel_ir as kir
    from kiln._C._inductor.kernel_ir import ops
    from kiln._inductor.ir import ir_dtype

    if stmt.kind != "store":
        return stmt
    dtype = ir_dtype(kernel.buffers[stmt.buffer].dtype)
    if dtype not in ("f32", "f64"):
        return stmt
    return kir.store(stmt.buffer, *stmt.index, ops.add(stmt.expr, kir.const(1.0, dtype)))
