"""The "inductor" backend, as PyTorch's torch/_dynamo/backends/inductor.py: registered by name
here, while kiln._inductor itself is imported only when a first graph is compiled (kiln.compile
and an import of kiln._dynamo load none of the lowering, LLVM bindings or decompositions)."""

from kiln._dynamo.backends.registry import register_backend


@register_backend
def inductor(gm, example_inputs, **kwargs):
    """kiln._inductor.compile_fx.compile_fx: AOTAutograd, lowering, fused LLVM kernels."""
    from kiln._inductor.compile_fx import compile_fx

    return compile_fx(gm, example_inputs, **kwargs)


def _with_config(mode=None, options=None):
    """The backend with kiln.compile's mode and options bound, validated now (an unknown option
    raises at kiln.compile, not at the first call)."""
    from kiln._inductor.compile_fx import compile_fx

    return compile_fx.with_config(mode, options)


inductor.with_config = _with_config
