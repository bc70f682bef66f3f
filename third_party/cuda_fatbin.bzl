"""cuda_fatbin: CUDA C++ kernels compiled by nvcc at build time and embedded in the module.

For the kernels the loop IR does not express (RNG, scatter with atomics, ...), DESIGN.md §3: one .cu
file becomes one fat binary (sm_90 machine code + compute_80 PTX), a byte array `kiln::cuda::SYMBOL`
with its size `SYMBOL##Size`, which tensor/cuda/embedded_kernels.h loads per device on first use.
"""

def cuda_fatbin(name, src, symbol, hdrs = []):
    native.genrule(
        name = name + "_compile",
        srcs = [src] + hdrs,
        outs = [name + "_fatbin.cc"],
        cmd = "$(location @cuda_nvcc//:compile_fatbin.sh) $@ %s $(location %s) -I." % (symbol, src),
        tools = ["@cuda_nvcc//:compile_fatbin.sh"],
        message = "nvcc " + src,
    )
    native.cc_library(
        name = name,
        srcs = [name + "_fatbin.cc"],
        alwayslink = True,
    )
