"""Repository rules that bring Debian's libraries and the chosen Python interpreter into Bazel.

Nothing is downloaded: each rule writes a BUILD file naming headers and libraries already on the
machine (tools/setup.sh installs them), so the workspace builds offline.
"""

def _system_library_impl(ctx):
    includes = []
    for i, path in enumerate(ctx.attr.includes):
        link = "include_%d" % i
        ctx.symlink(path, link)
        includes.append(link)
    ctx.file("BUILD.bazel", """
cc_library(
    name = "{name}",
    hdrs = glob([{globs}], allow_empty = True),
    includes = {includes},
    linkopts = {linkopts},
    visibility = ["//visibility:public"],
)
""".format(
        name = ctx.name,
        globs = ", ".join(['"%s/%s"' % (i, p) for i in includes for p in ctx.attr.header_patterns]) if includes and ctx.attr.glob_headers else "",
        includes = repr(includes),
        linkopts = repr(ctx.attr.linkopts),
    ))

system_library = repository_rule(
    implementation = _system_library_impl,
    attrs = {
        "includes": attr.string_list(),
        "linkopts": attr.string_list(),
        "glob_headers": attr.bool(default = False),
        # with glob_headers: what counts as a header (LLVM also needs its .def and .inc files)
        "header_patterns": attr.string_list(default = ["**/*.h"]),
    },
    local = True,
)

def _llvm_static_impl(ctx):
    """LLVM's static libraries for the named components, in the order llvm-config gives.

    kiln._C must import where Debian's libLLVM-14.so and its dependencies (z3, ICU 72, libxml2)
    are absent (the GPU machine runs Ubuntu 24.04), so LLVM is linked in and its symbols hidden by
    the module's -Wl,--exclude-libs,ALL (DESIGN.md §3). Only the objects kiln references are pulled
    from the archives; of LLVM's system libraries that leaves zlib and terminfo, linked statically too.
    """
    config = ctx.which(ctx.attr.llvm_config)
    if config == None:
        fail("%s not found: tools/setup.sh installs llvm-14-dev" % ctx.attr.llvm_config)
    result = ctx.execute([config, "--link-static", "--libfiles"] + ctx.attr.components)
    if result.return_code != 0:
        fail("llvm-config --libfiles: %s" % result.stderr)
    archives = result.stdout.strip().split(" ")
    include = ctx.execute([config, "--includedir"]).stdout.strip()
    ctx.symlink(include, "include")
    linkopts = ["-Wl,--start-group"] + archives + ["-Wl,--end-group"] + ctx.attr.system_linkopts
    ctx.file("BUILD.bazel", """
cc_library(
    name = "{name}",
    hdrs = glob([{globs}], allow_empty = True),
    includes = ["include"],
    linkopts = {linkopts},
    visibility = ["//visibility:public"],
)
""".format(
        name = ctx.name,
        globs = ", ".join(['"include/%s"' % p for p in ctx.attr.header_patterns]),
        linkopts = repr(linkopts),
    ))

llvm_static_library = repository_rule(
    implementation = _llvm_static_impl,
    attrs = {
        "llvm_config": attr.string(default = "llvm-config-14"),
        "components": attr.string_list(),
        "header_patterns": attr.string_list(),
        "system_linkopts": attr.string_list(),
    },
    local = True,
)

def _cuda_libdevice_impl(ctx):
    """libdevice, NVIDIA's math library as LLVM bitcode (__nv_expf, __nv_log, ...), embedded in the module.

    The NVPTX code generator (codegen/nvptx_codegen.cc) links it into each kernel that needs math
    the GPU has no instruction for. It is taken from the local CUDA toolkit at build time, so the
    built module carries it to GPU machines whose toolkit may lack it. No toolkit here: an empty
    library, and kernels that need libdevice fail with a message saying so (the rest still build).
    """
    candidates = [ctx.os.environ.get("KILN_CUDA_HOME", ""), "/usr/local/cuda-13.0", "/usr/local/cuda", "/usr/lib/nvidia-cuda-toolkit"]
    found = None
    for home in candidates:
        if home == "":
            continue
        for rel in ["nvvm/libdevice/libdevice.10.bc", "libdevice/libdevice.10.bc"]:
            if ctx.path(home + "/" + rel).exists:
                found = home + "/" + rel
                break
        if found:
            break
    if found:
        ctx.symlink(found, "libdevice.10.bc")
        result = ctx.execute(["sh", "-c", "od -An -v -tx1 libdevice.10.bc | sed 's/ \\([0-9a-f][0-9a-f]\\)/0x\\1,/g' > libdevice_bytes.inc"])
        if result.return_code != 0:
            fail("converting %s: %s" % (found, result.stderr))
    else:
        ctx.file("libdevice_bytes.inc", "")
    ctx.file("libdevice.cc", """// libdevice from {source}, as bytes (third_party/system.bzl: cuda_libdevice).
#include <cstddef>
namespace kiln::codegen {{
alignas(16) extern const unsigned char kLibdevice[] = {{
#include "libdevice_bytes.inc"
0}};
extern const size_t kLibdeviceSize = sizeof(kLibdevice) - 1;
}}  // namespace kiln::codegen
""".format(source = found or "nowhere (no CUDA toolkit at build time)"))
    ctx.file("BUILD.bazel", """
cc_library(
    name = "{name}",
    srcs = ["libdevice.cc"],
    textual_hdrs = ["libdevice_bytes.inc"],
    visibility = ["//visibility:public"],
)
""".format(name = ctx.name))

cuda_libdevice = repository_rule(
    implementation = _cuda_libdevice_impl,
    environ = ["KILN_CUDA_HOME"],
    local = True,
)

_PY_QUERY = """
import sys, sysconfig
print(sysconfig.get_paths()["include"])
print(sysconfig.get_config_var("EXT_SUFFIX"))
print("%d.%d" % sys.version_info[:2])
print(sysconfig.get_config_var("LIBDIR"))
print(sys.base_prefix)
"""

def _kiln_python_impl(ctx):
    python = ctx.os.environ.get("KILN_PYTHON", "python3")
    binary = ctx.which(python) if not python.startswith("/") else ctx.path(python)
    if binary == None:
        fail("KILN_PYTHON=%s: interpreter not found on PATH" % python)
    result = ctx.execute([binary, "-c", _PY_QUERY])
    if result.return_code != 0:
        fail("KILN_PYTHON=%s could not report its configuration: %s" % (python, result.stderr))
    include, ext_suffix, version, libdir, prefix = result.stdout.strip().split("\n")
    ctx.symlink(include, "include")
    ctx.file("BUILD.bazel", """
cc_library(
    name = "headers",
    hdrs = glob(["include/**/*.h"]),
    includes = ["include"],
    visibility = ["//visibility:public"],
)

# For C++ tests that embed the interpreter (Py_Initialize): libpython and where its stdlib is.
cc_library(
    name = "embed",
    deps = [":headers"],
    defines = ["KILN_PYTHON_HOME={prefix}"],  # a bare path; embedded_python.h quotes it
    linkopts = ["-L{libdir}", "-lpython{version}", "-Wl,-rpath,{libdir}"],
    visibility = ["//visibility:public"],
)
""".format(prefix = prefix, libdir = libdir, version = version))
    ctx.file("defs.bzl", "EXT_SUFFIX = %r\nPY_VERSION = %r\n" % (ext_suffix, version))

kiln_python = repository_rule(
    implementation = _kiln_python_impl,
    environ = ["KILN_PYTHON", "PATH"],
    local = True,
)

def _cuda_nvcc_impl(ctx):
    """nvcc from the local CUDA toolkit, for the kernels kiln compiles ahead of time (cuda_fatbin.bzl).

    Writes `compile_fatbin.sh`, which compiles one .cu file into a fat binary (sm_90 machine code and
    compute_80 PTX, which the driver compiles for any newer device) and writes it as a C++ byte array.
    -fmad=false: a * b + c is rounded twice, as the LLVM-generated CUDA kernels round it, so a kernel
    computes what the ops it replaces compute; where a CPU kernel's expression is contracted by GCC
    (random.cc's from + u * range), the .cu file calls fma() itself. These kernels are bound by
    memory, not arithmetic.
    No toolkit here: the script writes an empty array, and the ops that need those kernels say so
    when called on a CUDA tensor (a machine without nvcc has no GPU to run them on either).
    """
    candidates = [ctx.os.environ.get("KILN_CUDA_HOME", ""), "/usr/local/cuda-13.0", "/usr/local/cuda"]
    nvcc = ""
    for home in candidates:
        if home != "" and ctx.path(home + "/bin/nvcc").exists:
            nvcc = home + "/bin/nvcc"
            break
    if nvcc == "":
        found = ctx.which("nvcc")
        nvcc = str(found) if found else ""
    ctx.file("compile_fatbin.sh", """#!/bin/sh
# compile_fatbin.sh OUT.cc SYMBOL SRC.cu [nvcc flags...]: SRC.cu's fat binary as kiln::cuda::SYMBOL
# (third_party/system.bzl: cuda_nvcc). nvcc: {nvcc}
set -e
out=$1; symbol=$2; src=$3; shift 3
nvcc="{nvcc}"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
: > "$tmp/bytes.inc"
if [ -n "$nvcc" ]; then
  TMPDIR="$tmp" "$nvcc" -fatbin -O3 -std=c++17 -fmad=false -Xptxas -warn-spills \\
    -gencode arch=compute_90,code=sm_90 -gencode arch=compute_80,code=compute_80 \\
    "$@" -o "$tmp/kernels.fatbin" "$src"
  od -An -v -tx1 "$tmp/kernels.fatbin" | sed 's/ \\([0-9a-f][0-9a-f]\\)/0x\\1,/g' > "$tmp/bytes.inc"
fi
{{
  echo "// $src compiled by nvcc ahead of time (${{nvcc:-no nvcc at build time: empty}})."
  echo "#include <cstddef>"
  echo "namespace kiln::cuda {{"
  echo "alignas(64) extern const unsigned char $symbol[] = {{"
  cat "$tmp/bytes.inc"
  echo "0}};"
  echo "extern const size_t ${{symbol}}Size = sizeof($symbol) - 1;"
  echo "}}  // namespace kiln::cuda"
}} > "$out"
""".format(nvcc = nvcc), executable = True)
    ctx.file("BUILD.bazel", """exports_files(["compile_fatbin.sh"])\n""")

cuda_nvcc = repository_rule(
    implementation = _cuda_nvcc_impl,
    environ = ["KILN_CUDA_HOME", "PATH"],
    local = True,
)
