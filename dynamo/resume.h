// dynamo/resume.h: resume functions — the code that continues a frame after a graph break.
//
// Note [Resume code]
// At a graph break Dynamo runs the graph compiled so far, runs the breaking instruction in
// Python, then calls a resume function to continue the original frame from the next instruction
// with the locals and value stack it would have had. The resume code is a copy of the original
// code object with a prologue in front of the unchanged body:
//
//   [COPY_FREE_VARS n]  RESUME 0                        the usual function entry
//   per stack slot, bottom to top:                       rebuild the value stack
//     PUSH_NULL                                          (a NULL slot, null_mask true)
//     LOAD_FAST ___stack; LOAD_CONST i; BINARY_SUBSCR    (the i-th non-NULL value)
//   DELETE_FAST d for each dead local d                  (passed as None; unbound again)
//   JUMP_FORWARD -> target                               into the original body
//
// Its arguments are all of the original co_varnames (in order, so every LOAD_FAST/STORE_FAST
// keeps its index) followed by `___stack`, a tuple; CO_VARARGS/CO_VARKEYWORDS are dropped (those
// locals arrive as plain tuple/dict arguments). The new local shifts the free variables' slots by
// one, so free-variable opargs are rewritten in place; jumps are relative and the body does not
// move relative to itself, so nothing else in it changes. The exception table is shifted by the
// prologue's length and the line table starts with "no location" entries over the prologue, so
// tracebacks inside the body keep their original lines. Code with cell variables (its prologue
// would need MAKE_CELL and cells passed in) and generator-like code are refused.
#pragma once

#include <Python.h>

#include <string>
#include <vector>

namespace kiln::dynamo {

// The local that carries the stack values into a resume function.
inline constexpr const char* kResumeStackName = "___stack";

// Builds the resume code for `code` at byte offset `target_offset` (an instruction's start).
// `null_mask` has one entry per stack slot at the target, bottom first (true: NULL).
// `dead_locals` are unbound on entry (DELETE_FAST): the locals not live at the target (see
// LiveLocals) and any live one that is unbound in the frame being resumed.
// Returns a new code object, or nullptr with a Python exception set (ValueError for code or
// arguments it cannot serve).
PyObject* MakeResumeCode(PyCodeObject* code, int target_offset, const std::vector<bool>& null_mask,
                         const std::vector<std::string>& dead_locals, const std::string& name);

}  // namespace kiln::dynamo
