// dynamo/resume_test.cc: resume code (dynamo/resume.h) run in the embedded interpreter.
//
// Each case breaks a function after a call, builds the resume code for the next instruction,
// calls it (types.FunctionType) with the locals and stack the original frame had there, and
// checks it finishes as the original does. The C++ entry points reach the test's Python through
// a small module of shims (`resume_shims`), so the cases read like tests/test_dynamo_resume.py.
#include "dynamo/resume.h"

#include <gtest/gtest.h>

#include "dynamo/bytecode_analysis.h"
#include "dynamo/testing/embedded_python.h"

namespace kiln::dynamo {
namespace {

PyObject* LiveLocalsShim(PyObject*, PyObject* args) {
  PyObject* code;
  int offset;
  if (!PyArg_ParseTuple(args, "O!i", &PyCode_Type, &code, &offset)) return nullptr;
  std::vector<std::string> names;
  if (!LiveLocalNamesAt(reinterpret_cast<PyCodeObject*>(code), offset, &names)) return nullptr;
  PyObject* out = PyList_New(0);
  for (const std::string& n : names) {
    PyObject* s = PyUnicode_FromString(n.c_str());
    PyList_Append(out, s);
    Py_DECREF(s);
  }
  return out;
}

PyObject* MakeResumeCodeShim(PyObject*, PyObject* args) {
  PyObject *code, *mask, *dead;
  int offset;
  const char* name;
  if (!PyArg_ParseTuple(args, "O!iOOs", &PyCode_Type, &code, &offset, &mask, &dead, &name)) return nullptr;
  std::vector<bool> null_mask;
  for (Py_ssize_t i = 0; i < PySequence_Size(mask); ++i) {
    PyObject* b = PySequence_GetItem(mask, i);
    null_mask.push_back(b == Py_True);
    Py_DECREF(b);
  }
  std::vector<std::string> dead_locals;
  for (Py_ssize_t i = 0; i < PySequence_Size(dead); ++i) {
    PyObject* s = PySequence_GetItem(dead, i);
    dead_locals.push_back(PyUnicode_AsUTF8(s));
    Py_DECREF(s);
  }
  return MakeResumeCode(reinterpret_cast<PyCodeObject*>(code), offset, null_mask, dead_locals, name);
}

PyMethodDef kShims[] = {
    {"live_locals", LiveLocalsShim, METH_VARARGS, nullptr},
    {"make_resume_code", MakeResumeCodeShim, METH_VARARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

// Runs `source` after a prelude that imports the shims and defines the helpers; fails the test
// if it raises (the traceback goes to stderr).
void Check(const std::string& source) {
  testing::EnsurePython();
  PyObject* modules = PyImport_GetModuleDict();
  if (!PyDict_GetItemString(modules, "resume_shims")) {
    PyObject* m = PyModule_New("resume_shims");
    PyModule_AddFunctions(m, kShims);
    PyDict_SetItemString(modules, "resume_shims", m);
    Py_DECREF(m);
  }
  static const char* kPrelude =
      "import dis, sys, traceback, types\n"
      "from resume_shims import live_locals, make_resume_code\n"
      "def after_call(fn, nth):\n"
      "    ins = list(dis.get_instructions(fn))\n"
      "    calls = [k for k, i in enumerate(ins) if i.opname == 'CALL']\n"
      "    return ins[calls[nth] + 1].offset\n"
      "def resume(fn, target, null_mask, stack, local_values):\n"
      "    code = fn.__code__\n"
      "    live = live_locals(code, target)\n"
      "    assert set(live) <= set(local_values), (live, local_values)\n"
      "    dead = [v for v in code.co_varnames if v not in live]\n"
      "    rc = make_resume_code(code, target, null_mask, dead, 'resume_in_' + fn.__name__)\n"
      "    f = types.FunctionType(rc, fn.__globals__, rc.co_name, None, fn.__closure__)\n"
      "    return f(*[local_values[v] if v in live else None for v in code.co_varnames], tuple(stack))\n"
      "def h(x):\n"
      "    return x * 3\n";
  EXPECT_NO_THROW(Py_DECREF(testing::RunSource(std::string(kPrelude) + source)));
}

TEST(Resume, StraightLine) {
  Check(
      "def f(a, b):\n"
      "    c = a + b\n"
      "    d = h(c)\n"
      "    return d * 2 + a\n"
      "t = after_call(f, 0)\n"
      "assert live_locals(f.__code__, t) == ['a']\n"
      "assert resume(f, t, [False], [h(12)], {'a': 5}) == f(5, 7)\n");
}

TEST(Resume, InsideForLoopWithIteratorOnStack) {
  Check(
      "def f(x, n):\n"
      "    total = 0\n"
      "    for i in range(n):\n"
      "        total = total + h(i)\n"
      "    return total + x\n"
      "t = after_call(f, 1)\n"
      "it = iter(range(6)); next(it); next(it); next(it)\n"
      "assert resume(f, t, [False, False, False], [it, h(0) + h(1), h(2)], {'x': 1}) == f(1, 6)\n");
}

TEST(Resume, NestedExpressionWithNullBelowCallable) {
  Check(
      "def pair(p, q): return (p, q)\n"
      "def f(x, y):\n"
      "    return pair(x, h(y)) + (x,)\n"
      "t = after_call(f, 0)\n"
      "assert resume(f, t, [True, False, False, False], [pair, 4, h(9)], {'x': 4}) == f(4, 9)\n");
}

TEST(Resume, FreeVariables) {
  Check(
      "def outer(k):\n"
      "    def inner(x):\n"
      "        nonlocal k\n"
      "        y = h(x)\n"
      "        k = k + y\n"
      "        return k\n"
      "    return inner\n"
      "inner = outer(10)\n"
      "assert resume(inner, after_call(inner, 0), [False], [h(2)], {}) == 16 == outer(10)(2)\n"
      "assert inner.__closure__[0].cell_contents == 16\n");
}

TEST(Resume, TryExceptAroundTarget) {
  Check(
      "def f(x):\n"
      "    try:\n"
      "        y = h(x)\n"
      "        z = 30 // y\n"
      "    except ZeroDivisionError:\n"
      "        z = -1\n"
      "    return z + x\n"
      "t = after_call(f, 0)\n"
      "assert resume(f, t, [False], [h(2)], {'x': 2}) == f(2) == 7\n"
      "assert resume(f, t, [False], [h(0)], {'x': 0}) == f(0) == -1\n");
}

TEST(Resume, TracebackKeepsOriginalLine) {
  Check(
      "def f(x):\n"
      "    y = h(x)\n"
      "    z = y + 1\n"
      "    return z / 0\n"
      "rc = make_resume_code(f.__code__, after_call(f, 0), [False], ['y', 'z'], 'resume_in_f')\n"
      "try:\n"
      "    types.FunctionType(rc, globals())(1, None, None, (3,))\n"
      "except ZeroDivisionError as e:\n"
      "    frame, line = list(traceback.walk_tb(e.__traceback__))[-1]\n"
      "    assert frame.f_code is rc and line == f.__code__.co_firstlineno + 3, line\n"
      "else:\n"
      "    raise AssertionError('no exception')\n");
}

TEST(Resume, RefusesCellsAndGenerators) {
  PyObject* cells = testing::Evaluate("def f(x):\n    return lambda: x\n", "f");
  PyObject* gen = testing::Evaluate("def g(x):\n    yield x\n", "g");
  for (PyObject* fn : {cells, gen}) {
    PyObject* code = PyObject_GetAttrString(fn, "__code__");
    EXPECT_EQ(MakeResumeCode(reinterpret_cast<PyCodeObject*>(code), 0, {}, {}, "r"), nullptr);
    EXPECT_TRUE(PyErr_ExceptionMatches(PyExc_ValueError));
    PyErr_Clear();
    Py_DECREF(code);
    Py_DECREF(fn);
  }
}

}  // namespace
}  // namespace kiln::dynamo
