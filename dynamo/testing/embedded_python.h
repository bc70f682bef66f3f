// dynamo/testing/embedded_python.h: an interpreter inside a C++ test, for the dynamo cc_tests.
//
// dynamo works on live Python objects (code objects, frames' locals, tensors), so its C++ tests
// start CPython in-process (libpython, through @local_python//:embed) and build their inputs by
// running Python source. Include from test files only.
#pragma once

#include <Python.h>

#include <stdexcept>
#include <string>

#define KILN_EMBED_QUOTE_(x) #x
#define KILN_EMBED_QUOTE(x) KILN_EMBED_QUOTE_(x)

// Under --config=asan (.bazelrc): the interpreter is never finalized and keeps its objects in
// pymalloc arenas, which are mmap'd and so not scanned by LeakSanitizer; buffers reachable only
// from those objects would be reported as thousands of leaks that are not bugs. Leak checking is
// off for the tests that embed Python; ASAN_OPTIONS still overrides this. Weak, so that a test
// binary including this header from several files links, and unused without ASan.
extern "C" __attribute__((weak, used)) const char* __asan_default_options() { return "detect_leaks=0"; }

namespace kiln::dynamo::testing {

// Starts the interpreter on first use (stdlib from KILN_PYTHON_HOME); it lives to process exit.
inline void EnsurePython() {
  if (Py_IsInitialized()) return;
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  PyConfig_SetBytesString(&config, &config.home, KILN_EMBED_QUOTE(KILN_PYTHON_HOME));
  PyStatus status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status)) throw std::runtime_error("could not start Python");
}

// Runs `source` in a fresh module namespace and returns that namespace (a new reference).
inline PyObject* RunSource(const std::string& source) {
  EnsurePython();
  PyObject* globals = PyDict_New();
  PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
  PyObject* result = PyRun_String(source.c_str(), Py_file_input, globals, globals);
  if (!result) {
    PyErr_Print();
    Py_DECREF(globals);
    throw std::runtime_error("test source raised");
  }
  Py_DECREF(result);
  return globals;
}

// The object `name` after running `source` (a new reference).
inline PyObject* Evaluate(const std::string& source, const char* name) {
  PyObject* globals = RunSource(source);
  PyObject* value = PyDict_GetItemString(globals, name);
  Py_XINCREF(value);
  Py_DECREF(globals);
  if (!value) throw std::runtime_error(std::string("test source defines no ") + name);
  return value;
}

}  // namespace kiln::dynamo::testing
