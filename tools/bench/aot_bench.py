"""AOTAutograd on the digits CNN (batch 128) and one transformer block (batch 8, 64 tokens,
width 128): for each partitioner, the bytes of activations the forward saves for the backward
(saved values that are not inputs), and the time to trace the joint graph, functionalize and
partition it (the first call minus an eager call; compilers are no-ops). Target: at most 100 ms.

    tools/python tools/bench/aot_bench.py
"""

import sys
import time

sys.path.insert(0, __file__.rsplit("/", 2)[0])
from digits import cnn  # noqa: E402
from models import transformer_block  # noqa: E402

import kiln  # noqa: E402
from kiln._functorch.aot_autograd import aot_module  # noqa: E402
from kiln._functorch.compile import (  # noqa: E402
    default_partition, make_boxed_func, min_cut_rematerialization_partition,
)


def measure(make, shape, partition):
    kiln.manual_seed(0)
    model = make()
    x = kiln.randn(*shape)
    seen = {}

    def fw_compiler(gm, example_inputs):
        seen["fw"] = gm
        return make_boxed_func(gm.forward)

    def bw_compiler(gm, example_inputs):
        seen["bw"] = gm
        return make_boxed_func(gm.forward)

    model(x).sum().backward()
    t0 = time.perf_counter()
    model(x).sum().backward()
    eager = time.perf_counter() - t0
    compiled = aot_module(model, fw_compiler, bw_compiler, partition_fn=partition)
    t0 = time.perf_counter()
    compiled(x).sum().backward()
    first = time.perf_counter() - t0 - eager
    bw_inputs = [n for n in seen["bw"].graph.nodes if n.op == "placeholder" and not n.name.startswith("tangents")]
    activation = 0
    for n in bw_inputs:
        val = n.meta.get("val")
        if isinstance(val, kiln.Tensor) and not n.name.startswith("primals"):
            activation += val.numel() * val.element_size()
    return activation, len(bw_inputs), first * 1e3


def main():
    cases = [("digits CNN, batch 128", lambda: cnn(kiln), (128, 64)),
             ("transformer block 8x64x128", lambda: transformer_block(kiln), (8, 64, 128))]
    print(f"{'model':30} {'partitioner':10} {'saved activations':>18} {'saved values':>13} {'trace+partition':>16}")
    for name, make, shape in cases:
        for pname, partition in (("default", default_partition), ("min-cut", min_cut_rematerialization_partition)):
            activation, count, ms = measure(make, shape, partition)
            print(f"{name:30} {pname:10} {activation / 1024:15.1f} KiB {count:13d} {ms:13.1f} ms")
    print("target: trace+partition at most 100 ms")


if __name__ == "__main__":
    main()
