// dynamo/bytecode.cc: decoding CPython bytecode (see bytecode.h).
#include "dynamo/bytecode.h"

#include <algorithm>

#include <opcode.h>

#include "dynamo/cpython_frame.h"

namespace kiln::dynamo {

namespace {
constexpr int kCache = 0;  // CACHE is opcode 0 in 3.11 and 3.12
}  // namespace

bool Decode(PyCodeObject* code, std::vector<Instruction>* out) {
  out->clear();
  PyObject* bytes = PyCode_GetCode(code);  // deoptimised: no specialised or instrumented opcodes
  if (!bytes) return false;
  const auto* units = reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(bytes));
  Py_ssize_t n = PyBytes_GET_SIZE(bytes);
  int extended = 0, start = -1;
  for (Py_ssize_t off = 0; off < n; off += 2) {
    int op = kiln_opcode_deopt(units[off]);
    int arg = units[off + 1] | extended;
    if (op == kCache) continue;
    if (start < 0) start = static_cast<int>(off);
    if (op == EXTENDED_ARG) {
      extended = arg << 8;
      continue;
    }
    Instruction ins;
    ins.opcode = op;
    ins.arg = op >= HAVE_ARGUMENT ? arg : 0;
    ins.offset = static_cast<int>(off);
    ins.start_offset = start;
    ins.line = PyCode_Addr2Line(code, static_cast<int>(off));
    out->push_back(ins);
    extended = 0;
    start = -1;
    off += 2 * kiln_opcode_caches(op);
  }
  Py_DECREF(bytes);
  // Relative jumps count code units from the end of the instruction's caches.
  for (Instruction& ins : *out) {
    if (!kiln_opcode_is_jump(ins.opcode)) continue;
    int delta = kiln_opcode_is_backward_jump(ins.opcode) ? -ins.arg : ins.arg;
    int target = ins.offset + 2 + 2 * kiln_opcode_caches(ins.opcode) + 2 * delta;
    ins.jump_target = InstructionAt(*out, target);
    if (ins.jump_target < 0) {
      PyErr_Format(PyExc_SystemError, "kiln: jump at offset %d targets offset %d, which starts no instruction",
                   ins.offset, target);
      return false;
    }
  }
  for (const Instruction& ins : *out)
    if (ins.jump_target >= 0) (*out)[ins.jump_target].is_jump_target = true;
  return true;
}

int InstructionAt(const std::vector<Instruction>& instructions, int offset) {
  // Jumps land on an instruction's first EXTENDED_ARG prefix when it has one.
  auto it = std::lower_bound(instructions.begin(), instructions.end(), offset,
                             [](const Instruction& i, int off) { return i.offset < off; });
  if (it != instructions.end() && (it->start_offset == offset || it->offset == offset))
    return static_cast<int>(it - instructions.begin());
  if (it != instructions.begin()) {
    auto prev = it - 1;
    if (prev->start_offset == offset) return static_cast<int>(prev - instructions.begin());
  }
  for (size_t i = 0; i < instructions.size(); ++i)
    if (instructions[i].start_offset == offset) return static_cast<int>(i);
  return -1;
}

}  // namespace kiln::dynamo
