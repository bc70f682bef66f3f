// python/csrc/precompiled.h: the headers most of python/csrc's sources include, compiled once.
//
// Every source of //python:_C.so is compiled as if this were its first #include (the BUILD's
// `-include`), and GCC loads it precompiled (Note [Precompiled headers] in
// third_party/precompiled_header.bzl): pybind11 and kiln's tensor and compiler headers took 8 s
// to parse in each of 28 sources. Sources still include what they use themselves. List here
// what many sources include and is slow to parse; a header only one source needs stays out (it
// would be parsed by every source where the precompiled header cannot be used).
#ifndef KILN_PYTHON_CSRC_PRECOMPILED_H_  // a guard, not #pragma once: GCC compiles it as a main file
#define KILN_PYTHON_CSRC_PRECOMPILED_H_

#include <Python.h>
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "autograd/grad_mode.h"
#include "python/csrc/arg_parser.h"
#include "python/csrc/python_dtype.h"
#include "python/csrc/python_fx.h"
#include "python/csrc/python_inductor.h"
#include "python/csrc/python_symbolic.h"
#include "python/csrc/python_tensor.h"
#include "python/csrc/tensor_caster.h"
#include "tensor/fake_tensor.h"
#include "tensor/ops/common.h"

#endif  // KILN_PYTHON_CSRC_PRECOMPILED_H_
