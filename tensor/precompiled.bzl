"""What a library or test adds to start its sources with tensor/precompiled.h, precompiled.

Note [Precompiled headers] in third_party/precompiled_header.bzl. Each struct pairs the `copts`
that make GCC read the header first with the `deps` that build it for those options:

    cc_library(name = "fx", ..., copts = API_PCH.copts, deps = ["//tensor"] + API_PCH.deps)
    cc_test(name = "graph_test", ..., copts = TEST_PCH.copts, deps = [...] + TEST_PCH.deps)

API_PCH: the compiler packages above tensor/ (the default options of .bazelrc); TEST_PCH: their
tests and tensor/'s (-O0 by .bazelrc's per-file option for *_test.cc, gtest included).
"""

def _pch(name):
    return struct(
        copts = ["-include", "$(GENDIR)/tensor/%s.h" % name],
        deps = ["//tensor:%s" % name],
    )

TENSOR_PCH = _pch("tensor_precompiled")
API_PCH = _pch("api_precompiled")
TEST_PCH = _pch("test_precompiled")
