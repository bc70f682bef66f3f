// dynamo/eval_frame.cc: the frame hook (Note [Frame hook] in eval_frame.h).
#include "dynamo/eval_frame.h"

#include <atomic>
#include <vector>

#include "dynamo/cpython_frame.h"
#include "dynamo/guards.h"

namespace kiln::dynamo {
namespace {

struct CacheEntry {
  PyObject* guard;     // callable(f_locals) -> bool, owned
  PyObject* code;      // the code to run instead, owned
  PyObject* function;  // a function over `code` for closure-free originals, owned or null
  RootGuardManager* root;  // `guard` itself when it is a RootGuardManager (checked in C++), or null
  PyObject* owner;         // the callback that made it, owned: entries serve only their own
                           // callback (one kiln.compile's backend never runs another's code)
};

// Stored on each code object through CPython's co_extra slots.
struct CodeExtra {
  std::vector<CacheEntry> entries;  // newest first
  bool skip = false;
};

Py_ssize_t g_extra_index = -1;
std::atomic<int> g_threads_with_callback{0};
thread_local PyObject* tls_callback = nullptr;
thread_local bool tls_in_callback = false;

void FreeExtra(void* p) {
  // CPython calls every registered free function for a dying code object that has any extra
  // slot set, ours empty or not (PyTorch's hook sets its own slot on the same code objects).
  if (p == nullptr) return;
  auto* extra = static_cast<CodeExtra*>(p);
  for (CacheEntry& e : extra->entries) {
    Py_DECREF(e.guard);
    Py_DECREF(e.code);
    Py_XDECREF(e.function);
    Py_XDECREF(e.owner);
  }
  delete extra;
}

Py_ssize_t ExtraIndex() {
  if (g_extra_index < 0) g_extra_index = _PyEval_RequestCodeExtraIndex(FreeExtra);
  return g_extra_index;
}

CodeExtra* GetExtra(PyCodeObject* code) {
  void* p = nullptr;
  if (_PyCode_GetExtra(reinterpret_cast<PyObject*>(code), ExtraIndex(), &p) < 0) {
    PyErr_Clear();
    return nullptr;
  }
  return static_cast<CodeExtra*>(p);
}

CodeExtra* GetOrCreateExtra(PyCodeObject* code) {
  CodeExtra* extra = GetExtra(code);
  if (extra) return extra;
  extra = new CodeExtra();
  if (_PyCode_SetExtra(reinterpret_cast<PyObject*>(code), ExtraIndex(), extra) < 0) {
    delete extra;
    return nullptr;
  }
  return extra;
}

int TotalArgs(PyCodeObject* code) {
  int n = code->co_argcount + code->co_kwonlyargcount;
  if (code->co_flags & CO_VARARGS) ++n;
  if (code->co_flags & CO_VARKEYWORDS) ++n;
  return n;
}

// {name: value} of the frame's arguments (all that is bound at entry), plus {name: contents} of
// its free variables whose cells are not empty. At entry the free variables are not yet copied
// into the frame (COPY_FREE_VARS does that), so they are read from the function's closure; their
// names are the last co_nfreevars of the localsplus names, in closure order.
PyObject* ArgumentsDict(_PyInterpreterFrame* frame, PyCodeObject* code) {
  PyObject* names = kiln_code_localsplusnames(code);
  PyObject** locals = kiln_frame_localsplus(frame);
  PyObject* d = PyDict_New();
  if (!d) return nullptr;
  int n = TotalArgs(code);
  for (int i = 0; i < n; ++i) {
    if (locals[i] == nullptr) continue;
    if (PyDict_SetItem(d, PyTuple_GET_ITEM(names, i), locals[i]) < 0) {
      Py_DECREF(d);
      return nullptr;
    }
  }
  PyObject* closure = reinterpret_cast<PyFunctionObject*>(kiln_frame_function(frame))->func_closure;
  int nfree = code->co_nfreevars;
  if (closure && nfree > 0 && PyTuple_GET_SIZE(closure) == nfree) {
    Py_ssize_t first = PyTuple_GET_SIZE(names) - nfree;
    for (int i = 0; i < nfree; ++i) {
      PyObject* contents = PyCell_GET(PyTuple_GET_ITEM(closure, i));
      if (contents == nullptr) continue;
      if (PyDict_SetItem(d, PyTuple_GET_ITEM(names, first + i), contents) < 0) {
        Py_DECREF(d);
        return nullptr;
      }
    }
  }
  return d;
}

// 1 when entry's guard accepts f_locals, 0 when not, -1 with an error set. A RootGuardManager is
// checked in C++ (it never raises); any other guard is called. Guards run with the hook off for
// this thread: their Python (lambda guards included) is the compiler's, never user code to capture.
int RunGuard(const CacheEntry& entry, PyObject* f_locals) {
  tls_in_callback = true;
  if (entry.root) {
    bool ok = entry.root->Check(f_locals);
    tls_in_callback = false;
    return ok ? 1 : 0;
  }
  PyObject* ok = PyObject_CallOneArg(entry.guard, f_locals);
  tls_in_callback = false;
  if (!ok) return -1;
  int truth = PyObject_IsTrue(ok);
  Py_DECREF(ok);
  return truth;
}

// A function running `new_code` with the original function's globals, name and closure.
PyObject* MakeFunction(_PyInterpreterFrame* frame, PyObject* new_code) {
  auto* original = reinterpret_cast<PyFunctionObject*>(kiln_frame_function(frame));
  PyObject* fn = PyFunction_New(new_code, kiln_frame_globals(frame));
  if (!fn) return nullptr;
  if (original->func_closure && PyFunction_SetClosure(fn, original->func_closure) < 0) {
    Py_DECREF(fn);
    return nullptr;
  }
  return fn;
}

// Calls `fn` with the frame's arguments: positional ones, *args spread, keyword-only ones and
// **kwargs by name.
PyObject* CallWithFrameArguments(PyObject* fn, _PyInterpreterFrame* frame, PyCodeObject* code) {
  PyObject** locals = kiln_frame_localsplus(frame);
  PyObject* names = kiln_code_localsplusnames(code);
  int argc = code->co_argcount, kwonly = code->co_kwonlyargcount;
  // The common call (positional arguments only) passes the frame's slots themselves: no copy.
  if (!(code->co_flags & (CO_VARARGS | CO_VARKEYWORDS)) && kwonly == 0)
    return PyObject_Vectorcall(fn, locals, argc, nullptr);
  std::vector<PyObject*> args(locals, locals + argc);
  int next = argc + kwonly;
  if (code->co_flags & CO_VARARGS) {
    PyObject* varargs = locals[next++];
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(varargs); ++i) args.push_back(PyTuple_GET_ITEM(varargs, i));
  }
  size_t npositional = args.size();
  PyObject* varkw = (code->co_flags & CO_VARKEYWORDS) ? locals[next] : nullptr;
  Py_ssize_t nkw = kwonly + (varkw ? PyDict_GET_SIZE(varkw) : 0);
  PyObject* kwnames = nullptr;
  if (nkw > 0) {
    kwnames = PyTuple_New(nkw);
    if (!kwnames) return nullptr;
    Py_ssize_t k = 0;
    for (int i = 0; i < kwonly; ++i, ++k) {
      PyObject* name = PyTuple_GET_ITEM(names, argc + i);
      Py_INCREF(name);
      PyTuple_SET_ITEM(kwnames, k, name);
      args.push_back(locals[argc + i]);
    }
    if (varkw) {
      Py_ssize_t pos = 0;
      PyObject *key, *value;
      while (PyDict_Next(varkw, &pos, &key, &value)) {
        Py_INCREF(key);
        PyTuple_SET_ITEM(kwnames, k++, key);
        args.push_back(value);
      }
    }
  }
  PyObject* result = PyObject_Vectorcall(fn, args.data(), npositional, kwnames);
  Py_XDECREF(kwnames);
  return result;
}

PyObject* RunEntry(CacheEntry& entry, _PyInterpreterFrame* frame, PyCodeObject* code) {
  PyObject* fn = entry.function;
  bool owned = false;
  if (fn == nullptr) {
    fn = MakeFunction(frame, entry.code);
    if (!fn) return nullptr;
    // Without a closure the function depends only on the code and globals: keep it.
    if (reinterpret_cast<PyFunctionObject*>(kiln_frame_function(frame))->func_closure == nullptr) {
      entry.function = fn;
    } else {
      owned = true;
    }
  }
  PyObject* result = CallWithFrameArguments(fn, frame, code);
  if (owned) Py_DECREF(fn);
  return result;
}

PyObject* EvalFrame(PyThreadState* tstate, _PyInterpreterFrame* frame, int throw_flag) {
  PyObject* callback = tls_callback;
  PyCodeObject* code = kiln_frame_code(frame);
  if (callback == nullptr || tls_in_callback || throw_flag ||
      (code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR)) ||
      kiln_frame_function(frame) == nullptr) {
    return kiln_eval_frame_default(tstate, frame, throw_flag);
  }
  CodeExtra* extra = GetExtra(code);
  if (extra && extra->skip) return kiln_eval_frame_default(tstate, frame, throw_flag);

  PyObject* f_locals = ArgumentsDict(frame, code);
  if (!f_locals) return nullptr;
  if (extra) {
    for (size_t i = 0; i < extra->entries.size(); ++i) {
      if (extra->entries[i].owner != callback) continue;
      int truth = RunGuard(extra->entries[i], f_locals);
      if (truth < 0) {
        Py_DECREF(f_locals);
        return nullptr;
      }
      if (truth) {
        Py_DECREF(f_locals);
        return RunEntry(extra->entries[i], frame, code);
      }
    }
  }

  // Miss: ask the callback, with the hook off for this thread.
  PyObject* function = kiln_frame_function(frame);
  tls_in_callback = true;
  PyObject* result = PyObject_CallFunctionObjArgs(callback, reinterpret_cast<PyObject*>(code), f_locals,
                                                  kiln_frame_globals(frame), kiln_frame_builtins(frame),
                                                  function, nullptr);
  tls_in_callback = false;
  Py_DECREF(f_locals);
  if (!result) return nullptr;
  if (result == Py_None) {
    Py_DECREF(result);
    return kiln_eval_frame_default(tstate, frame, throw_flag);
  }
  PyObject *guard = nullptr, *new_code = nullptr;
  if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 2 ||
      !PyCallable_Check(guard = PyTuple_GET_ITEM(result, 0)) ||
      !PyCode_Check(new_code = PyTuple_GET_ITEM(result, 1))) {
    Py_DECREF(result);
    PyErr_SetString(PyExc_TypeError, "kiln's frame callback must return None or a (guard, code) tuple");
    return nullptr;
  }
  extra = GetOrCreateExtra(code);
  if (!extra) {
    Py_DECREF(result);
    return nullptr;
  }
  Py_INCREF(guard);
  Py_INCREF(new_code);
  Py_INCREF(callback);
  extra->entries.insert(extra->entries.begin(),
                        CacheEntry{guard, new_code, nullptr, AsRootGuardManager(guard), callback});
  Py_DECREF(result);
  return RunEntry(extra->entries.front(), frame, code);
}

}  // namespace

PyObject* SetEvalFrameCallback(PyObject* callback) {
  if (callback == Py_None) callback = nullptr;
  PyObject* previous = tls_callback ? tls_callback : Py_None;
  Py_INCREF(previous);
  if (callback && !tls_callback) {
    if (g_threads_with_callback.fetch_add(1) == 0) kiln_set_eval_frame(&EvalFrame);
  } else if (!callback && tls_callback) {
    if (g_threads_with_callback.fetch_sub(1) == 1) kiln_set_eval_frame(nullptr);
  }
  Py_XINCREF(callback);
  PyObject* old = tls_callback;
  tls_callback = callback;
  Py_XDECREF(old);
  return previous;
}

void SkipCode(PyCodeObject* code) {
  if (CodeExtra* extra = GetOrCreateExtra(code)) extra->skip = true;
}

void ResetCode(PyCodeObject* code) {
  CodeExtra* extra = GetExtra(code);
  if (!extra) return;
  for (CacheEntry& e : extra->entries) {
    Py_DECREF(e.guard);
    Py_DECREF(e.code);
    Py_XDECREF(e.function);
    Py_XDECREF(e.owner);
  }
  extra->entries.clear();
  extra->skip = false;
}

PyObject* CacheEntries(PyCodeObject* code) {
  PyObject* list = PyList_New(0);
  CodeExtra* extra = GetExtra(code);
  if (!list || !extra) return list;
  for (const CacheEntry& e : extra->entries) {
    PyObject* t = PyTuple_Pack(2, e.guard, e.code);
    if (!t || PyList_Append(list, t) < 0) {
      Py_XDECREF(t);
      Py_DECREF(list);
      return nullptr;
    }
    Py_DECREF(t);
  }
  return list;
}

}  // namespace kiln::dynamo
