// dynamo/scoped_call.h: a callable that runs a function with a given frame callback.
//
// kiln.compile(fn) returns ScopedCall(fn, callback): calling it sets this thread's frame
// callback (eval_frame.h) for the duration of the call and restores the previous one, and
// kiln._dynamo.disable(fn) is ScopedCall(fn, None). It is a C type with vectorcall, because it
// sits on every compiled call: a Python wrapper would add a frame and two calls, more than the
// whole cost of the cache lookup and guards.
#pragma once

#include <Python.h>

namespace kiln::dynamo {

// A new ScopedCall over `fn` (callable) and `callback` (callable or None); null with an exception
// set on failure. It binds as a method (descriptor), forwards attribute writes to its own
// __dict__, and exposes `__wrapped__` and `_kiln_callback`.
PyObject* MakeScopedCall(PyObject* fn, PyObject* callback);
// The ScopedCall type (ready on first use), or null with an exception set.
PyTypeObject* ScopedCallType();

}  // namespace kiln::dynamo
