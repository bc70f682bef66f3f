// dynamo/bytecode.h: CPython 3.11/3.12 bytecode decoded into instructions, and analyses on them.
//
// Decode reads a code object's (deoptimised) bytecode: EXTENDED_ARG prefixes fold into their
// instruction's argument, inline CACHE entries are skipped, relative jumps become instruction
// indices, and each instruction gets its source line (from co_positions' line table, through
// PyCode_Addr2Line). It matches `dis.get_instructions(code)` (tests compare the two).
#pragma once

#include <Python.h>

#include <string>
#include <vector>

namespace kiln::dynamo {

struct Instruction {
  int opcode = 0;        // base opcode (specialised forms mapped back)
  int arg = 0;           // the full argument (EXTENDED_ARG prefixes folded in)
  int offset = 0;        // byte offset of the opcode itself
  int start_offset = 0;  // byte offset of its first EXTENDED_ARG prefix (== offset if none)
  int line = -1;         // source line, -1 when none
  int jump_target = -1;  // index of the instruction it jumps to, -1 if it does not jump
  bool is_jump_target = false;
};

// Raises (a Python exception set, returns false) on malformed code.
bool Decode(PyCodeObject* code, std::vector<Instruction>* out);
// Index of the instruction at byte offset `offset`, or -1.
int InstructionAt(const std::vector<Instruction>& instructions, int offset);

}  // namespace kiln::dynamo
