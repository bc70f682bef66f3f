/* dynamo/cpython_frame.c: reads CPython's internal frame layout; see cpython_frame.h. */
#define Py_BUILD_CORE 1
#include "dynamo/cpython_frame.h"

#include "internal/pycore_frame.h"
#include "internal/pycore_interp.h"
#if PY_VERSION_HEX >= 0x030C0000
/* 3.12's internal headers clash on this name when mixed with the public ones (cpython#105268). */
#undef _PyGC_FINALIZED
#endif
#define NEED_OPCODE_TABLES
#include "internal/pycore_opcode.h"
#undef NEED_OPCODE_TABLES

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030D0000
#error "kiln's frame hook supports CPython 3.11 and 3.12"
#endif

PyCodeObject* kiln_frame_code(struct _PyInterpreterFrame* frame) { return frame->f_code; }

PyObject* kiln_frame_function(struct _PyInterpreterFrame* frame) {
#if PY_VERSION_HEX >= 0x030C0000
  return frame->f_funcobj;
#else
  return (PyObject*)frame->f_func;
#endif
}

PyObject* kiln_frame_globals(struct _PyInterpreterFrame* frame) { return frame->f_globals; }
PyObject* kiln_frame_builtins(struct _PyInterpreterFrame* frame) { return frame->f_builtins; }
PyObject** kiln_frame_localsplus(struct _PyInterpreterFrame* frame) { return frame->localsplus; }
PyObject* kiln_code_localsplusnames(PyCodeObject* code) { return code->co_localsplusnames; }

PyObject* kiln_eval_frame_default(PyThreadState* tstate, struct _PyInterpreterFrame* frame, int throw_flag) {
  return _PyEval_EvalFrameDefault(tstate, frame, throw_flag);
}

void kiln_set_eval_frame(KilnEvalFrameFn fn) {
  PyThreadState* tstate = PyThreadState_Get();
  if (fn) {
    _PyInterpreterState_SetEvalFrameFunc(tstate->interp, (_PyFrameEvalFunction)fn);
    return;
  }
  /* Back to CPython's own state, a NULL eval_frame: 3.11's setter would store the default
     function itself, and a non-NULL eval_frame turns off 3.11's inlined Python-to-Python calls. */
  tstate->interp->eval_frame = NULL;
}

int kiln_opcode_caches(int op) { return _PyOpcode_Caches[op & 255]; }
int kiln_opcode_deopt(int op) { return _PyOpcode_Deopt[op & 255]; }
int kiln_opcode_is_jump(int op) { return (_PyOpcode_Jump[(op & 255) >> 5] >> (op & 31)) & 1; }

int kiln_opcode_is_backward_jump(int op) {
  switch (op) {
    case JUMP_BACKWARD:
    case JUMP_BACKWARD_NO_INTERRUPT:
#if PY_VERSION_HEX < 0x030C0000
    case POP_JUMP_BACKWARD_IF_FALSE:
    case POP_JUMP_BACKWARD_IF_TRUE:
    case POP_JUMP_BACKWARD_IF_NONE:
    case POP_JUMP_BACKWARD_IF_NOT_NONE:
#endif
      return 1;
    default:
      return 0;
  }
}
