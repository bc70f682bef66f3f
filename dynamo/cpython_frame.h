/* dynamo/cpython_frame.h: a narrow C interface to CPython's internal frames (3.11, 3.12).
 *
 * Everything that depends on the layout of _PyInterpreterFrame lives in cpython_frame.c, which
 * is compiled as C with Py_BUILD_CORE (CPython's internal headers are C, not C++). The rest of
 * dynamo/ sees frames as opaque pointers and these accessors. */
#pragma once

#include <Python.h>

#ifdef __cplusplus
extern "C" {
#endif

struct _PyInterpreterFrame;
typedef PyObject* (*KilnEvalFrameFn)(PyThreadState*, struct _PyInterpreterFrame*, int);

PyCodeObject* kiln_frame_code(struct _PyInterpreterFrame* frame);
PyObject* kiln_frame_function(struct _PyInterpreterFrame* frame);  /* borrowed */
PyObject* kiln_frame_globals(struct _PyInterpreterFrame* frame);   /* borrowed */
PyObject* kiln_frame_builtins(struct _PyInterpreterFrame* frame);  /* borrowed */
/* The frame's fast locals; at frame entry the first slots hold the arguments. */
PyObject** kiln_frame_localsplus(struct _PyInterpreterFrame* frame);
/* The names of the fast locals (a tuple, borrowed). */
PyObject* kiln_code_localsplusnames(PyCodeObject* code);

/* Opcode facts of the running CPython: inline cache entries after `op`, the base opcode of a
 * specialised one, and whether `op` jumps (relative; backward when it jumps back). */
int kiln_opcode_caches(int op);
int kiln_opcode_deopt(int op);
int kiln_opcode_is_jump(int op);
int kiln_opcode_is_backward_jump(int op);

PyObject* kiln_eval_frame_default(PyThreadState* tstate, struct _PyInterpreterFrame* frame, int throw_flag);
void kiln_set_eval_frame(KilnEvalFrameFn fn); /* NULL restores CPython's own */

#ifdef __cplusplus
}
#endif
