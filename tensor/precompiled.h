// tensor/precompiled.h: the headers most of kiln's C++ sources start with, parsed once per set of
// compile options (Note [Precompiled headers] in third_party/precompiled_header.bzl).
//
// tensor/BUILD.bazel precompiles it three times: for tensor/'s own sources (-O3), for the compiler
// packages above tensor/ (the default options) and for the tests (-O0, with gtest: precompiled_test.h).
// Their sources read it first (`-include`, tensor/precompiled.bzl) and still include what they use.
// List here only what most of them include and is slow to parse (tensor/ops/common.h: 3.9 s).
#ifndef KILN_TENSOR_PRECOMPILED_H_  // a guard, not #pragma once: GCC compiles it as a main file
#define KILN_TENSOR_PRECOMPILED_H_

#include "tensor/ops/common.h"

#endif  // KILN_TENSOR_PRECOMPILED_H_
