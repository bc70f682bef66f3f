// dynamo/bytecode_analysis.cc: exception tables and liveness of fast locals (see the header).
#include "dynamo/bytecode_analysis.h"

#include <opcode.h>

namespace kiln::dynamo {

namespace {

constexpr int kEntryStart = 0x80, kContinue = 0x40, kGroup = 0x3f;

bool ReadVarint(const std::string& b, size_t* pos, bool first, int* value) {
  if (*pos >= b.size()) return false;
  int byte = static_cast<uint8_t>(b[(*pos)++]);
  if (((byte & kEntryStart) != 0) != first) return false;
  int v = byte & kGroup;
  while (byte & kContinue) {
    if (*pos >= b.size() || v >= (1 << 24)) return false;
    byte = static_cast<uint8_t>(b[(*pos)++]);
    if (byte & kEntryStart) return false;
    v = (v << 6) | (byte & kGroup);
  }
  *value = v;
  return true;
}

void WriteVarint(int value, bool first, std::string* out) {
  int shift = 0;
  while (shift + 6 < 31 && (value >> (shift + 6)) != 0) shift += 6;
  int mark = first ? kEntryStart : 0;
  for (; shift > 0; shift -= 6) {
    out->push_back(static_cast<char>(((value >> shift) & kGroup) | kContinue | mark));
    mark = 0;
  }
  out->push_back(static_cast<char>((value & kGroup) | mark));
}

// Unconditional transfers: nothing falls through to the next instruction.
bool EndsBlock(int op) {
  switch (op) {
    case RETURN_VALUE:
    case RAISE_VARARGS:
    case RERAISE:
    case JUMP_FORWARD:
    case JUMP_BACKWARD:
    case JUMP_BACKWARD_NO_INTERRUPT:
#ifdef RETURN_CONST
    case RETURN_CONST:
#endif
      return true;
    default:
      return false;
  }
}

// Which local instruction `ins` reads (gen) and writes (kill); -1 for none.
void Effects(const Instruction& ins, int nlocals, int* gen, int* kill) {
  *gen = *kill = -1;
  switch (ins.opcode) {
    case LOAD_FAST:
#ifdef LOAD_FAST_CHECK
    case LOAD_FAST_CHECK:
#endif
#ifdef LOAD_FAST_AND_CLEAR
    case LOAD_FAST_AND_CLEAR:  // saves the outer value around an inlined comprehension
#endif
      *gen = ins.arg;
      return;
    case STORE_FAST:
      *kill = ins.arg;
      return;
    case DELETE_FAST:  // raises UnboundLocalError when unbound: observes the local, then clears it
      *gen = *kill = ins.arg;
      return;
    default:
      if (IsDerefOp(ins.opcode) && ins.arg < nlocals) *gen = ins.arg;  // an argument's cell
      return;
  }
}

#if PY_VERSION_HEX < 0x030C0000
bool UsesClassCell(PyCodeObject* code) {
  PyObject* freevars = PyCode_GetFreevars(code);
  if (!freevars) {
    PyErr_Clear();
    return true;  // conservatively
  }
  bool found = false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(freevars); ++i)
    found |= PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(freevars, i), "__class__") == 0;
  Py_DECREF(freevars);
  return found;
}
#endif

}  // namespace

bool IsDerefOp(int op) {
  switch (op) {
    case LOAD_DEREF:
    case STORE_DEREF:
    case DELETE_DEREF:
    case LOAD_CLOSURE:
#ifdef LOAD_CLASSDEREF
    case LOAD_CLASSDEREF:
#endif
#ifdef LOAD_FROM_DICT_OR_DEREF
    case LOAD_FROM_DICT_OR_DEREF:
#endif
      return true;
    default:  // COPY_FREE_VARS's argument is a count, not a slot
      return false;
  }
}

bool ParseExceptionTable(const std::string& bytes, std::vector<ExceptionTableEntry>* out) {
  out->clear();
  size_t pos = 0;
  while (pos < bytes.size()) {
    int start, length, target, depth_lasti;
    if (!ReadVarint(bytes, &pos, true, &start) || !ReadVarint(bytes, &pos, false, &length) ||
        !ReadVarint(bytes, &pos, false, &target) || !ReadVarint(bytes, &pos, false, &depth_lasti))
      return false;
    ExceptionTableEntry e;
    e.start = 2 * start;
    e.end = 2 * (start + length);
    e.target = 2 * target;
    e.depth = depth_lasti >> 1;
    e.lasti = depth_lasti & 1;
    out->push_back(e);
  }
  return true;
}

std::string EncodeExceptionTable(const std::vector<ExceptionTableEntry>& entries) {
  std::string out;
  for (const ExceptionTableEntry& e : entries) {
    WriteVarint(e.start / 2, true, &out);
    WriteVarint((e.end - e.start) / 2, false, &out);
    WriteVarint(e.target / 2, false, &out);
    WriteVarint((e.depth << 1) | (e.lasti ? 1 : 0), false, &out);
  }
  return out;
}

bool CodeExceptionTable(PyCodeObject* code, std::vector<ExceptionTableEntry>* out) {
  PyObject* table = code->co_exceptiontable;
  if (!PyBytes_Check(table)) {
    PyErr_SetString(PyExc_SystemError, "kiln: co_exceptiontable is not bytes");
    return false;
  }
  std::string bytes(PyBytes_AS_STRING(table), PyBytes_GET_SIZE(table));
  if (!ParseExceptionTable(bytes, out)) {
    PyErr_SetString(PyExc_ValueError, "kiln: malformed exception table");
    return false;
  }
  return true;
}

const ExceptionTableEntry* HandlerFor(const std::vector<ExceptionTableEntry>& table, int offset) {
  for (const ExceptionTableEntry& e : table)
    if (e.start <= offset && offset < e.end) return &e;
  return nullptr;
}

bool LiveLocals(PyCodeObject* code, const std::vector<Instruction>& instructions,
                std::vector<std::vector<bool>>* live) {
  std::vector<ExceptionTableEntry> table;
  if (!CodeExceptionTable(code, &table)) return false;
  const int n = static_cast<int>(instructions.size());
  const int nlocals = code->co_nlocals;
  // Successors of each instruction: fall-through/jump (normal) and the handler (exceptional).
  std::vector<int> handler(n, -1);
  for (int i = 0; i < n; ++i) {
    if (const ExceptionTableEntry* e = HandlerFor(table, instructions[i].offset)) {
      handler[i] = InstructionAt(instructions, e->target);
      if (handler[i] < 0) {
        PyErr_Format(PyExc_SystemError, "kiln: exception handler at offset %d starts no instruction", e->target);
        return false;
      }
    }
  }
  live->assign(n, std::vector<bool>(nlocals, false));
  // Backward data flow to a fixed point; iterating from the end converges in a few sweeps.
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = n - 1; i >= 0; --i) {
      const Instruction& ins = instructions[i];
      std::vector<bool> in(nlocals, false);
      auto merge = [&](int succ) {
        if (succ < 0 || succ >= n) return;
        for (int v = 0; v < nlocals; ++v)
          if ((*live)[succ][v]) in[v] = true;
      };
      if (!EndsBlock(ins.opcode)) merge(i + 1);
      merge(ins.jump_target);
      int gen, kill;
      Effects(ins, nlocals, &gen, &kill);
      if (kill >= 0 && kill < nlocals) in[kill] = false;
      merge(handler[i]);  // an exception leaves before the instruction's write
      if (gen >= 0 && gen < nlocals) in[gen] = true;
      if (in != (*live)[i]) {
        (*live)[i] = std::move(in);
        changed = true;
      }
    }
  }
#if PY_VERSION_HEX < 0x030C0000
  // 3.11's zero-argument super() reads the frame's first local itself (3.12 loads it explicitly).
  if (code->co_argcount > 0 && nlocals > 0 && UsesClassCell(code))
    for (std::vector<bool>& l : *live) l[0] = true;
#endif
  return true;
}

bool InTryBlock(PyCodeObject* code, int offset, bool* out) {
  *out = false;
  std::vector<ExceptionTableEntry> table;
  if (!CodeExceptionTable(code, &table)) return false;
  std::vector<Instruction> instructions;
  for (const ExceptionTableEntry& e : table) {
    if (offset < e.start || offset >= e.end) continue;
    if (instructions.empty() && !Decode(code, &instructions)) return false;
    bool with_cleanup = false;
    for (int k = 0; k < 2; ++k) {  // the handler's first two instructions
      const int i = InstructionAt(instructions, e.target + 2 * k);
      with_cleanup = with_cleanup || (i >= 0 && instructions[i].opcode == WITH_EXCEPT_START);
    }
    if (!with_cleanup) {
      *out = true;
      return true;
    }
  }
  return true;
}

bool LiveLocalNamesAt(PyCodeObject* code, int offset, std::vector<std::string>* names) {
  names->clear();
  std::vector<Instruction> instructions;
  if (!Decode(code, &instructions)) return false;
  int index = InstructionAt(instructions, offset);
  if (index < 0) {
    PyErr_Format(PyExc_ValueError, "offset %d starts no instruction of %U", offset, code->co_name);
    return false;
  }
  std::vector<std::vector<bool>> live;
  if (!LiveLocals(code, instructions, &live)) return false;
  PyObject* varnames = PyCode_GetVarnames(code);
  if (!varnames) return false;
  for (int v = 0; v < code->co_nlocals; ++v)
    if (live[index][v]) names->push_back(PyUnicode_AsUTF8(PyTuple_GET_ITEM(varnames, v)));
  Py_DECREF(varnames);
  return true;
}

}  // namespace kiln::dynamo
