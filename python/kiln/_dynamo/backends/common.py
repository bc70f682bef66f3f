"""kiln._dynamo.backends.common: aot_autograd, the bridge from Dynamo graphs to AOTAutograd."""

from kiln import _C
from kiln._guards import compile_context
from kiln._dynamo.backends.registry import register_backend


def aot_autograd(**kwargs):
    """A Dynamo backend running AOTAutograd over the captured graph with the given fw_compiler,
    bw_compiler, partition_fn, decompositions and inference_compiler (PyTorch's keywords)."""
    if "fw_compiler" not in kwargs:
        raise TypeError("aot_autograd() needs fw_compiler=")

    def backend(gm, example_inputs):
        from kiln._functorch.aot_autograd import aot_module_simplified

        return aot_module_simplified(gm, example_inputs, **kwargs, on_trace_error=_on_trace_error)

    backend._kiln_aot_kwargs = kwargs
    return backend


# Note [Internal errors at the first call]: AOTAutograd traces, partitions and compiles (Inductor:
# LLVM) when a graph is first called with an input layout, after Dynamo handed the graph over,
# so an error there escaped convert_frame's Note [Internal errors] and reached the user
# (DynamicOutputShapeException from `x[mask] = w[0]` with w requiring grad). The graph then runs
# as written for that layout: if that raises, it is the user's error, raised as eager raises it;
# if not, the error was kiln's, and a warning naming the user's function says so once.
# fullgraph=True raises kiln's error instead.
def _on_trace_error(gm, error, run_eagerly):
    from kiln._dynamo import config
    from kiln._dynamo.convert_frame import _warn_internal_error

    code_ref = gm.meta.get("kiln_code")
    code = code_ref() if code_ref is not None else None
    if code is None or gm.meta.get("kiln_fullgraph") or not config.suppress_errors:
        raise error  # (a graph that did not come from Dynamo: the error is its caller's)
    outs = run_eagerly()  # the user's own error, if the graph has one, raises here
    if not gm.meta.get("kiln_warned"):
        gm.meta["kiln_warned"] = True
        with compile_context(gm.meta.get("kiln_compile_id")):  # its log line and trace event name the compile
            _warn_internal_error(code, error)
        _C._dynamo.skip_code(code)  # as the warning says: later calls run the function eagerly
    return outs


def _aot_eager():
    from kiln._functorch.compile import nop

    return aot_autograd(fw_compiler=nop, bw_compiler=nop, inference_compiler=nop)


def _aot_eager_min_cut():
    from kiln._functorch.compile import min_cut_rematerialization_partition, nop

    return aot_autograd(fw_compiler=nop, bw_compiler=nop, inference_compiler=nop,
                        partition_fn=min_cut_rematerialization_partition)


def aot_eager(gm, example_inputs):
    """AOTAutograd with the graphs run as Python: forward and backward aten graphs, default partition."""
    return _aot_eager()(gm, example_inputs)


def aot_eager_min_cut(gm, example_inputs):
    """aot_eager with the min-cut rematerialization partitioner."""
    return _aot_eager_min_cut()(gm, example_inputs)


def aot_eager_decomp_partition(gm, example_inputs):
    """aot_eager with Inductor's decompositions and min-cut partitioner: everything Inductor does
    before lowering (PyTorch's backend of this name, the bisector's third step)."""
    from kiln._functorch.compile import min_cut_rematerialization_partition, nop
    from kiln._inductor.bisect_controls import decompositions as allowed
    from kiln._inductor.decomposition import decompositions

    table = {op: fn for op, fn in sorted(decompositions().items(), key=lambda item: str(item[0]))
             if allowed.allow(str(op))}
    return aot_autograd(fw_compiler=nop, bw_compiler=nop, inference_compiler=nop, decompositions=table,
                        partition_fn=min_cut_rematerialization_partition)(gm, example_inputs)


register_backend(aot_eager, name="aot_eager")
register_backend(aot_eager_min_cut, name="aot_eager_min_cut")
register_backend(aot_eager_decomp_partition, name="aot_eager_decomp_partition")
