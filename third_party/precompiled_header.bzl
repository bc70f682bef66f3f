"""cc_precompiled_header: a header the sources of a library all start with, parsed once (GCC's .gch).

Note [Precompiled headers]: kiln's headers cost each source that includes them 2-4 s of parsing
before a line of its own (tensor/ops/common.h alone 3.9 s: dispatcher.h, ops.h, loops.h and the
standard library under them), and some 180 sources include them: a fifth of a clean build. The
rule compiles `hdr` once, with the toolchain's own command line for C++ sources (the same
features, --copt/--cxxopt and `copts`, the deps' include paths and defines), into
`<name>.h.gch` beside a copy `<name>.h` in the output tree. A consumer lists the rule in its
deps and adds

    copts = ["-include", "$(GENDIR)/<package>/<name>.h"]

so GCC reads the header first and finds `<name>.h.gch` beside it. GCC uses the .gch only where
the consumer's options match those it was compiled with (`copts` must repeat the consumer's own,
and -O0 and -O2 differ: a per-file `-O0` such as the tests' needs a rule of its own), and
otherwise parses the copy as a plain header: a mismatch (--config=asan's -O0 for every file)
costs time, never correctness. Sources still include what they use; the .gch makes the second
inclusion free (include guards and #pragma once).

A .gch is not byte-reproducible (two runs of the same command differ: GCC writes its heap as it
lies in memory), and it is an input of every consumer's compile. The disk cache hands back the
same bytes as long as the header's inputs are unchanged, so this costs nothing there; a .gch
compiled again (its headers changed, or no cache) changes every consumer's action key, as the
changed header it follows from would have anyway.
"""

load("@bazel_tools//tools/build_defs/cc:action_names.bzl", "CPP_COMPILE_ACTION_NAME")
load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

def _cc_precompiled_header_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    features = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    deps = cc_common.merge_cc_infos(cc_infos = [d[CcInfo] for d in ctx.attr.deps]).compilation_context

    header = ctx.actions.declare_file(ctx.attr.name + ".h")
    ctx.actions.symlink(output = header, target_file = ctx.file.hdr)
    gch = ctx.actions.declare_file(ctx.attr.name + ".h.gch")

    variables = cc_common.create_compile_variables(
        feature_configuration = features,
        cc_toolchain = cc_toolchain,
        user_compile_flags = ctx.fragments.cpp.copts + ctx.fragments.cpp.cxxopts + ctx.attr.copts,
        source_file = header.path,
        output_file = gch.path,
        include_directories = deps.includes,
        quote_include_directories = depset(
            [".", ctx.bin_dir.path, ctx.genfiles_dir.path],
            transitive = [deps.quote_includes],
        ),
        system_include_directories = deps.system_includes,
        preprocessor_defines = deps.defines,
        use_pic = True,
    )
    arguments = cc_common.get_memory_inefficient_command_line(
        feature_configuration = features,
        action_name = CPP_COMPILE_ACTION_NAME,
        variables = variables,
    )
    ctx.actions.run(
        executable = cc_common.get_tool_for_action(
            feature_configuration = features,
            action_name = CPP_COMPILE_ACTION_NAME,
        ),
        # a header, whatever its name: -x applies to the inputs named after it
        arguments = ["-x", "c++-header"] + arguments,
        env = cc_common.get_environment_variables(
            feature_configuration = features,
            action_name = CPP_COMPILE_ACTION_NAME,
            variables = variables,
        ),
        inputs = depset(
            [header, ctx.file.hdr] + ctx.files.private_hdrs,
            transitive = [deps.headers, cc_toolchain.all_files],
        ),
        outputs = [gch],
        mnemonic = "CppPrecompiledHeader",
        progress_message = "Precompiling %s as %s" % (ctx.file.hdr.short_path, gch.short_path),
    )
    return [
        DefaultInfo(files = depset([gch])),
        CcInfo(compilation_context = cc_common.create_compilation_context(headers = depset([header, gch]))),
    ]

cc_precompiled_header = rule(
    implementation = _cc_precompiled_header_impl,
    attrs = {
        "hdr": attr.label(allow_single_file = [".h"], mandatory = True),
        "private_hdrs": attr.label_list(
            allow_files = [".h"],
            doc = "headers of the consuming library that `hdr` includes and no dep provides",
        ),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(doc = "the consumers' own copts, which the .gch must share"),
        "_cc_toolchain": attr.label(default = Label("@bazel_tools//tools/cpp:current_cc_toolchain")),
    },
    fragments = ["cpp"],
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
)
