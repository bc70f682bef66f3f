// tensor/precompiled_test.h: tensor/precompiled.h and gtest, for the C++ tests of tensor/ and the
// packages above it, which build at -O0 (.bazelrc) and so need a precompiled header of their own
// (Note [Precompiled headers] in third_party/precompiled_header.bzl).
#ifndef KILN_TENSOR_PRECOMPILED_TEST_H_  // a guard, not #pragma once: GCC compiles it as a main file
#define KILN_TENSOR_PRECOMPILED_TEST_H_

#include <gtest/gtest.h>

#include "tensor/precompiled.h"

#endif  // KILN_TENSOR_PRECOMPILED_TEST_H_
