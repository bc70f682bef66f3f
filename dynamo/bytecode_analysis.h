// dynamo/bytecode_analysis.h: analyses over decoded bytecode (dynamo/bytecode.h) that graph
// breaks need: the exception table (parsed and re-encoded) and the liveness of fast locals.
//
// Exception table (CPython's Objects/exception_handling_notes.txt): a byte string of entries
// (start, length, target, depth << 1 | lasti), each item a varint of 6-bit groups, most
// significant first; bit 6 marks "more groups follow", bit 7 marks an entry's first byte.
// Positions are in code units in the bytes and in byte offsets here (as `dis` shows them).
//
// Liveness: a fast local (a co_varnames index) is live at an instruction when some path from
// that instruction may read it before writing it. Paths follow fall-through, jumps and, for
// instructions inside an exception-table range, the edge to that range's handler (taken before
// the instruction's own write). Reads: LOAD_FAST, 3.12's LOAD_FAST_CHECK and
// LOAD_FAST_AND_CLEAR, DELETE_FAST (it raises when the local is unbound, so it observes it),
// and any free-variable opcode naming an argument that is a cell (the slot holds the cell, so it
// is never killed). Writes (kills): STORE_FAST, DELETE_FAST (after its read).
// On 3.11 the first argument is live everywhere in code that may call zero-argument super().
// Implicit reads through locals(), vars(), eval() or frame inspection are not seen.
#pragma once

#include <Python.h>

#include <string>
#include <vector>

#include "dynamo/bytecode.h"

namespace kiln::dynamo {

struct ExceptionTableEntry {
  int start = 0;   // byte offset of the first covered code unit
  int end = 0;     // byte offset just past the last covered code unit
  int target = 0;  // byte offset of the handler
  int depth = 0;   // value-stack depth the handler unwinds to
  bool lasti = false;  // whether the handler also gets the raising instruction's offset

  bool operator==(const ExceptionTableEntry&) const = default;
};

// Whether `op`'s argument is the localsplus slot of a cell or free variable (LOAD_DEREF,
// STORE_DEREF, DELETE_DEREF, LOAD_CLOSURE, LOAD_CLASSDEREF / LOAD_FROM_DICT_OR_DEREF).
bool IsDerefOp(int op);

// Parses co_exceptiontable bytes; false on a truncated or malformed table.
bool ParseExceptionTable(const std::string& bytes, std::vector<ExceptionTableEntry>* out);
// The inverse of ParseExceptionTable (offsets must be even and end > start).
std::string EncodeExceptionTable(const std::vector<ExceptionTableEntry>& entries);
// Both, on a code object (a Python exception set and false on failure).
bool CodeExceptionTable(PyCodeObject* code, std::vector<ExceptionTableEntry>* out);
// The entry covering byte offset `offset` (CPython takes the first match), or nullptr.
const ExceptionTableEntry* HandlerFor(const std::vector<ExceptionTableEntry>& table, int offset);

// Whether byte offset `offset` lies in a try block: an exception-table entry covers it whose
// handler is not a with statement's cleanup (PUSH_EXC_INFO, WITH_EXCEPT_START), which resume code
// keeps working. Graph breaks there give up on the frame. Raises (false) on malformed code.
bool InTryBlock(PyCodeObject* code, int offset, bool* out);

// For each instruction, which co_varnames indices are live before it (see above). `live[i][v]`.
// Raises (a Python exception set, returns false) on malformed code.
bool LiveLocals(PyCodeObject* code, const std::vector<Instruction>& instructions,
                std::vector<std::vector<bool>>* live);
// The names of the locals live at the instruction at byte offset `offset`, in co_varnames
// order. ValueError when no instruction starts at `offset`.
bool LiveLocalNamesAt(PyCodeObject* code, int offset, std::vector<std::string>* names);

}  // namespace kiln::dynamo
