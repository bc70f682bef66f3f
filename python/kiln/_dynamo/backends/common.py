"""kiln._dynamo.backends.common: aot_autograd, the bridge from Dynamo graphs to AOTAutograd."""

from kiln._dynamo.backends.registry import register_backend


def aot_autograd(**kwargs):
    """A Dynamo backend running AOTAutograd over the captured graph with the given fw_compiler,
    bw_compiler, partition_fn, decompositions and inference_compiler (PyTorch's keywords)."""
    if "fw_compiler" not in kwargs:
        raise TypeError("aot_autograd() needs fw_compiler=")

    def backend(gm, example_inputs):
        from kiln._functorch.aot_autograd import aot_module_simplified

        return aot_module_simplified(gm, example_inputs, **kwargs)

    backend._kiln_aot_kwargs = kwargs
    return backend


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


register_backend(aot_eager, name="aot_eager")
register_backend(aot_eager_min_cut, name="aot_eager_min_cut")
