// dynamo/eval_frame.h: the PEP 523 frame hook and the per-code-object cache of compiled code.
//
// Note [Frame hook]: while a thread has a callback set, CPython hands every Python frame it
// starts to EvalFrame. If the frame's code object has a cache entry whose guard accepts the
// frame's arguments, the entry's code runs instead: a function built from it (same globals,
// closure and signature) is called with the same arguments, and its result is the frame's.
// On a miss the callback is asked for a new entry, `(guard, code)`, or for nothing, in which case
// the frame runs as written. An entry belongs to the callback that made it: frames running under
// another callback (another kiln.compile, another backend) neither see nor run it. The newest entry is tried first. Generators and coroutines always
// run as written. The callback runs with the hook off for its thread, so the Python code of the
// compiler itself is never intercepted.
//
// The frame is seen at entry, before its first instruction: its fast locals hold exactly the
// arguments (cells are not made yet), which is what guards read and what the new code receives.
#pragma once

#include <Python.h>

namespace kiln::dynamo {

// Sets this thread's callback (None or null: off); returns the previous one (new reference).
// The hook is installed in the interpreter while any thread has a callback.
PyObject* SetEvalFrameCallback(PyObject* callback);
// Never intercept frames of `code` again (until ResetCode).
void SkipCode(PyCodeObject* code);
// Drops the cache entries and the skip mark of `code`.
void ResetCode(PyCodeObject* code);
// The cache entries of `code`, newest first, as a list of (guard, code) tuples.
PyObject* CacheEntries(PyCodeObject* code);

}  // namespace kiln::dynamo
