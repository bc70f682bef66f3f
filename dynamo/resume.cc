// dynamo/resume.cc: building resume code objects (see Note [Resume code] in resume.h).
#include "dynamo/resume.h"

#include <algorithm>

#include <opcode.h>

#include "dynamo/bytecode.h"
#include "dynamo/bytecode_analysis.h"
#include "dynamo/cpython_frame.h"

namespace kiln::dynamo {

namespace {

constexpr int kGeneratorLike = CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE;
constexpr int kNoLocationEntry = 0x80 | (15 << 3);  // locations.md: code 15, length-1 in bits 0-2

// Appends `op arg` with the EXTENDED_ARG prefixes it needs and zeroed inline caches.
void Emit(std::string* code, int op, int arg) {
  int prefixes = 0;
  while (prefixes < 3 && (arg >> (8 * (prefixes + 1))) != 0) ++prefixes;
  for (int k = prefixes; k > 0; --k) {
    code->push_back(static_cast<char>(EXTENDED_ARG));
    code->push_back(static_cast<char>((arg >> (8 * k)) & 0xff));
  }
  code->push_back(static_cast<char>(op));
  code->push_back(static_cast<char>(arg & 0xff));
  code->append(2 * kiln_opcode_caches(op), '\0');
}

// New reference to a tuple with `extra` appended.
PyObject* TupleAppend(PyObject* tuple, const std::vector<PyObject*>& extra) {
  Py_ssize_t n = PyTuple_GET_SIZE(tuple);
  PyObject* out = PyTuple_New(n + static_cast<Py_ssize_t>(extra.size()));
  if (!out) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) {
    Py_INCREF(PyTuple_GET_ITEM(tuple, i));
    PyTuple_SET_ITEM(out, i, PyTuple_GET_ITEM(tuple, i));
  }
  for (size_t i = 0; i < extra.size(); ++i) PyTuple_SET_ITEM(out, n + i, extra[i]);  // steals
  return out;
}

// Owns a set of new references for the duration of MakeResumeCode.
struct Refs {
  std::vector<PyObject*> held;
  PyObject* operator()(PyObject* o) {
    if (o) held.push_back(o);
    return o;
  }
  ~Refs() {
    for (PyObject* o : held) Py_DECREF(o);
  }
};

}  // namespace

PyObject* MakeResumeCode(PyCodeObject* code, int target_offset, const std::vector<bool>& null_mask,
                         const std::vector<std::string>& dead_locals, const std::string& name) {
  Refs refs;
  if (code->co_flags & kGeneratorLike) {
    PyErr_Format(PyExc_ValueError, "resume code: %U is a generator or coroutine; its frames cannot be resumed",
                 code->co_name);
    return nullptr;
  }
  PyObject* cellvars = refs(PyCode_GetCellvars(code));
  PyObject* varnames = refs(PyCode_GetVarnames(code));
  if (!cellvars || !varnames) return nullptr;
  if (PyTuple_GET_SIZE(cellvars) > 0) {
    PyErr_Format(PyExc_ValueError, "resume code: %U has cell variables %R (not supported)", code->co_name,
                 cellvars);
    return nullptr;
  }
  const int nlocals = code->co_nlocals;
  std::vector<Instruction> instructions;
  if (!Decode(code, &instructions)) return nullptr;
  int target = InstructionAt(instructions, target_offset);
  if (target < 0) {
    PyErr_Format(PyExc_ValueError, "resume code: target_offset %d starts no instruction of %U", target_offset,
                 code->co_name);
    return nullptr;
  }
  const int target_byte = instructions[target].start_offset;
  std::vector<int> dead;
  for (const std::string& d : dead_locals) {
    int index = -1;
    for (int v = 0; v < nlocals; ++v)
      if (d == PyUnicode_AsUTF8(PyTuple_GET_ITEM(varnames, v))) index = v;
    if (index < 0) {
      PyErr_Format(PyExc_ValueError, "resume code: dead_locals names '%s', which is not a local of %U", d.c_str(),
                   code->co_name);
      return nullptr;
    }
    dead.push_back(index);
  }
  PyObject* stack_name = refs(PyUnicode_FromString(kResumeStackName));
  if (!stack_name) return nullptr;
  int contains = PySequence_Contains(varnames, stack_name);
  if (contains != 0) {
    if (contains > 0)
      PyErr_Format(PyExc_ValueError, "resume code: %U already has a local %U", code->co_name, stack_name);
    return nullptr;
  }

  // The body: the original bytes, free-variable slots moved up by one for the new local.
  PyObject* original = refs(PyCode_GetCode(code));
  if (!original) return nullptr;
  std::string body(PyBytes_AS_STRING(original), PyBytes_GET_SIZE(original));
  for (const Instruction& ins : instructions) {
    if (!IsDerefOp(ins.opcode) || ins.arg < nlocals) continue;
    int prefixes = (ins.offset - ins.start_offset) / 2;
    int arg = ins.arg + 1;
    if (arg >> (8 * (prefixes + 1))) {
      PyErr_Format(PyExc_ValueError,
                   "resume code: the free-variable instruction at offset %d of %U would need another EXTENDED_ARG",
                   ins.offset, code->co_name);
      return nullptr;
    }
    for (int k = 0; k <= prefixes; ++k)
      body[ins.start_offset + 2 * k + 1] = static_cast<char>((arg >> (8 * (prefixes - k))) & 0xff);
  }

  // The prologue.
  std::string prologue;
  PyObject* freevars = refs(PyCode_GetFreevars(code));
  if (!freevars) return nullptr;
  const int nfree = static_cast<int>(PyTuple_GET_SIZE(freevars));
  if (nfree > 0) Emit(&prologue, COPY_FREE_VARS, nfree);
  Emit(&prologue, RESUME, 0);
  const Py_ssize_t nconsts = PyTuple_GET_SIZE(code->co_consts);
  std::vector<PyObject*> new_consts;
  for (bool is_null : null_mask) {
    if (is_null) {
      Emit(&prologue, PUSH_NULL, 0);
      continue;
    }
    Emit(&prologue, LOAD_FAST, nlocals);
    Emit(&prologue, LOAD_CONST, static_cast<int>(nconsts + new_consts.size()));
    Emit(&prologue, BINARY_SUBSCR, 0);
    new_consts.push_back(PyLong_FromSize_t(new_consts.size()));
  }
  for (int d : dead) Emit(&prologue, DELETE_FAST, d);
  // The jump is the prologue's last instruction, so its distance is exactly the target's offset.
  Emit(&prologue, JUMP_FORWARD, target_byte / 2);
  const int shift = static_cast<int>(prologue.size());

  std::vector<ExceptionTableEntry> table;
  if (!CodeExceptionTable(code, &table)) {
    for (PyObject* c : new_consts) Py_XDECREF(c);
    return nullptr;
  }
  for (ExceptionTableEntry& e : table) {
    e.start += shift;
    e.end += shift;
    e.target += shift;
  }
  std::string exception_table = EncodeExceptionTable(table);

  std::string linetable;
  for (int units = shift / 2; units > 0; units -= 8)  // one entry covers at most 8 code units
    linetable.push_back(static_cast<char>(kNoLocationEntry | (std::min(units, 8) - 1)));
  linetable.append(PyBytes_AS_STRING(code->co_linetable), PyBytes_GET_SIZE(code->co_linetable));

  PyObject* consts = refs(TupleAppend(code->co_consts, new_consts));  // steals new_consts
  Py_INCREF(stack_name);
  PyObject* new_varnames = refs(TupleAppend(varnames, {stack_name}));
  if (!consts || !new_varnames) return nullptr;
  for (PyObject* c : new_consts)
    if (!c) return nullptr;

  PyObject* kwargs = refs(PyDict_New());
  if (!kwargs) return nullptr;
  auto set = [&](const char* key, PyObject* value) {
    if (!refs(value)) return false;
    return PyDict_SetItemString(kwargs, key, value) == 0;
  };
  const int stacksize = std::max(code->co_stacksize, static_cast<int>(null_mask.size()) + 2);
  if (!set("co_argcount", PyLong_FromLong(nlocals + 1)) || !set("co_posonlyargcount", PyLong_FromLong(0)) ||
      !set("co_kwonlyargcount", PyLong_FromLong(0)) || !set("co_nlocals", PyLong_FromLong(nlocals + 1)) ||
      !set("co_stacksize", PyLong_FromLong(stacksize)) ||
      !set("co_flags", PyLong_FromLong(code->co_flags & ~(CO_VARARGS | CO_VARKEYWORDS))) ||
      !set("co_code", PyBytes_FromStringAndSize((prologue + body).data(), shift + body.size())) ||
      !set("co_linetable", PyBytes_FromStringAndSize(linetable.data(), linetable.size())) ||
      !set("co_exceptiontable", PyBytes_FromStringAndSize(exception_table.data(), exception_table.size())) ||
      !set("co_name", PyUnicode_FromStringAndSize(name.data(), name.size())) ||
      !set("co_qualname", PyUnicode_FromStringAndSize(name.data(), name.size())))
    return nullptr;
  if (PyDict_SetItemString(kwargs, "co_consts", consts) || PyDict_SetItemString(kwargs, "co_varnames", new_varnames))
    return nullptr;
  PyObject* replace = refs(PyObject_GetAttrString(reinterpret_cast<PyObject*>(code), "replace"));
  PyObject* no_args = refs(PyTuple_New(0));
  if (!replace || !no_args) return nullptr;
  return PyObject_Call(replace, no_args, kwargs);
}

}  // namespace kiln::dynamo
