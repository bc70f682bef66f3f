"""kiln._inductor.utils: run_and_get_code, as torch._inductor.utils."""


def run_and_get_code(fn, *args, **kwargs):
    """fn(*args) and the readable code (kernels and wrapper) of every graph Inductor compiled
    during the call: (result, [code, ...])."""
    from kiln._inductor.compile_fx import code_sinks

    sink = []
    code_sinks.append(sink)
    try:
        result = fn(*args, **kwargs)
    finally:
        code_sinks.remove(sink)
    return result, sink
