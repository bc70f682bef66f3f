"""kiln._dynamo.repro: standalone repros of failing compiles (PyTorch's torch._dynamo.repro).

    after_dynamo.py  KILN_REPRO_AFTER=dynamo: a backend crash on a Dynamo graph, minified
    after_aot.py     KILN_REPRO_AFTER=aot: an Inductor crash on an aten graph
    minifier.py      the smallest part of a failing graph that still fails
"""
