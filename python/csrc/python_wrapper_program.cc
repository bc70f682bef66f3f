// python/csrc/python_wrapper_program.cc: kiln._C._inductor.WrapperProgram, the wrapper that runs a
// lowered graph, and Slot, a buffer's place in it. python/kiln/_inductor/wrapper.py builds one from
// GraphLowering's records and the memory plan (Note [The wrapper program]).
//
// Note [The wrapper program]: a compiled graph's wrapper allocates its buffers, makes views of
// them, runs its kernels and extern ops, and frees each buffer after its last use. It was Python
// source, exec'd once per graph: at 16 GPT layers 2,400 lines a graph, whose compile() alone was
// 40 ms of the cold compile, and whose text (with each call's `# File ...` provenance) took as long
// again to write. The steps now run from this program: values live in numbered slots (inputs,
// buffers, extern results), a step reads and writes slots, and a released slot drops its reference
// as `del` did. Extern ops are still called as Python callables (their C entry points, `_op`),
// with arguments rebuilt at each call from a template: constants as they are, Slots replaced by
// the slot's value. The wrapper's Python text is rendered only where someone reads it (logs,
// run_and_get_code, KILN_COMPILE_DEBUG's runnable output_code.py), from the same records and plan.
#include <Python.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "python/csrc/python_dtype.h"
#include "python/csrc/python_inductor.h"
#include "python/csrc/python_tensor.h"
#include "runtime/error.h"
#include "tensor/empty.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

constexpr const char* kOp = "[inductor.WrapperProgram] ";

// A buffer's place among a program's slots, where an extern call's argument or an output names it.
struct Slot {
  int index;
};

// An extern call's argument (or an output) as each call rebuilds it: a constant, the value of a
// slot, or a list or tuple with a slot somewhere inside.
struct ArgTemplate {
  enum Kind { kConst, kSlot, kList, kTuple } kind = kConst;
  py::object value;  // kConst
  int slot = -1;     // kSlot
  std::vector<ArgTemplate> items;
};

struct Step {
  enum Kind { kEmpty, kReinterpret, kKernel, kExtern, kAsDeclared, kRelease, kReturn } kind;
  int out = -1;   // the slot written (kEmpty, kReinterpret, kAsDeclared)
  int base = -1;  // kReinterpret: the slot viewed
  DimVector size, stride;
  std::optional<int64_t> offset;  // kReinterpret: the base's own when unset
  ScalarType dtype = ScalarType::Undefined;
  std::shared_ptr<codegen::CompiledKernel> kernel;
  std::vector<int> slots;  // kKernel: its buffers in order; kRelease: those freed; kExtern: results (-1: none)
  py::object fn;           // kExtern: the op; kAsDeclared: the copy into the declared layout
  std::vector<ArgTemplate> args;  // kExtern: positional, then keyword values; kReturn: the outputs
  py::object kwnames;             // kExtern: a tuple of keyword names, or None
  bool unpack = false;            // kExtern: the op returns a sequence, one result per item
};

DimVector Ints(const std::vector<int64_t>& v) { return DimVector(v.begin(), v.end()); }

SymDimVector SymInts(const DimVector& v) {
  SymDimVector out;
  for (int64_t x : v) out.push_back(SymInt(x));
  return out;
}

py::tuple Tuple(const DimVector& v) {
  py::tuple t(v.size());
  for (size_t i = 0; i < v.size(); ++i) t[i] = py::int_(v[i]);
  return t;
}

class WrapperProgram {
 public:
  WrapperProgram(int num_slots, std::vector<int> inputs) : num_slots_(num_slots), inputs_(std::move(inputs)) {
    KILN_CHECK_VALUE(num_slots >= 0, kOp, "num_slots must be >= 0, got ", num_slots);
    for (int s : inputs_) CheckSlot(s, "an input");
  }

  void Static(int slot, const std::vector<int64_t>& size, const std::vector<int64_t>& stride, py::handle dtype) {
    CheckSlot(slot, "a static buffer");
    KILN_CHECK_VALUE(size.size() == stride.size(), kOp, "static buffer ", slot, ": ", size.size(), " sizes but ",
                     stride.size(), " strides");
    statics_.push_back(Step{Step::kEmpty, slot, -1, Ints(size), Ints(stride), std::nullopt, DtypeOf(dtype)});
  }

  void Empty(int slot, const std::vector<int64_t>& size, const std::vector<int64_t>& stride, py::handle dtype) {
    CheckSlot(slot, "empty's output");
    KILN_CHECK_VALUE(size.size() == stride.size(), kOp, "empty: ", size.size(), " sizes but ", stride.size(),
                     " strides");
    steps_.push_back(Step{Step::kEmpty, slot, -1, Ints(size), Ints(stride), std::nullopt, DtypeOf(dtype)});
  }

  void Reinterpret(int slot, int base, const std::vector<int64_t>& size, const std::vector<int64_t>& stride,
                   std::optional<int64_t> offset) {
    CheckSlot(slot, "a view");
    CheckSlot(base, "a view's base");
    KILN_CHECK_VALUE(size.size() == stride.size(), kOp, "reinterpret: ", size.size(), " sizes but ", stride.size(),
                     " strides");
    steps_.push_back(Step{Step::kReinterpret, slot, base, Ints(size), Ints(stride), offset});
  }

  void Kernel(py::handle compiled, const std::vector<int>& slots) {
    Step s{Step::kKernel};
    s.kernel = py::cast<const PyCompiledKernel&>(compiled).k;
    for (int slot : slots) CheckSlot(slot, "a kernel's buffer");
    KILN_CHECK_VALUE(slots.size() == s.kernel->kernel().buffers.size(), kOp, s.kernel->name(), " takes ",
                     s.kernel->kernel().buffers.size(), " buffers, got ", slots.size());
    s.slots = slots;
    steps_.push_back(std::move(s));
  }

  void Extern(py::object fn, py::sequence args, py::dict kwargs, const std::vector<int>& results, bool unpack) {
    KILN_CHECK_TYPE(PyCallable_Check(fn.ptr()), kOp, "an extern op must be callable, got ", Repr(fn));
    for (int r : results)
      if (r != -1) CheckSlot(r, "an extern's result");
    KILN_CHECK_VALUE(unpack || results.size() <= 1, kOp, "an extern op returning one value has one result, got ",
                     results.size());
    Step s{Step::kExtern};
    s.fn = std::move(fn);
    for (py::handle a : args) s.args.push_back(Template(a));
    if (!kwargs.empty()) {
      py::tuple names(kwargs.size());
      size_t i = 0;
      for (auto item : kwargs) {
        names[i++] = item.first;
        s.args.push_back(Template(item.second));
      }
      s.kwnames = std::move(names);
    }
    s.slots = results;
    s.unpack = unpack;
    steps_.push_back(std::move(s));
  }

  void AsDeclared(int slot, const std::vector<int64_t>& size, const std::vector<int64_t>& stride, py::object copy) {
    CheckSlot(slot, "as_declared's buffer");
    Step s{Step::kAsDeclared, slot, -1, Ints(size), Ints(stride)};
    s.fn = std::move(copy);
    steps_.push_back(std::move(s));
  }

  void Release(const std::vector<int>& slots) {
    for (int slot : slots) CheckSlot(slot, "a released buffer");
    Step s{Step::kRelease};
    s.slots = slots;
    steps_.push_back(std::move(s));
  }

  void Return(py::sequence values) {
    Step s{Step::kReturn};
    for (py::handle v : values) s.args.push_back(Template(v));
    steps_.push_back(std::move(s));
  }

  // call(args): the boxed calling convention of compiled graphs: `args` (a list) is emptied, so
  // each input can be freed after its last use.
  py::object Call(py::list args) {
    const size_t n = args.size();
    if (n != inputs_.size())
      throw TypeError(StrCat(kOp, "expected ", inputs_.size(), " inputs, got ", n));
    std::vector<py::object> slots(num_slots_);
    for (size_t i = 0; i < n; ++i) slots[inputs_[i]] = args[i];
    if (PyList_SetSlice(args.ptr(), 0, static_cast<Py_ssize_t>(n), nullptr) != 0) throw py::error_already_set();
    if (!statics_.empty()) {
      if (static_values_.empty())  // reduce-overhead: made by the first call, kept
        for (const Step& s : statics_) static_values_.push_back(Allocate(s));
      for (size_t i = 0; i < statics_.size(); ++i) slots[statics_[i].out] = static_values_[i];
    }
    for (const Step& s : steps_) {
      switch (s.kind) {
        case Step::kEmpty:
          slots[s.out] = Allocate(s);
          break;
        case Step::kReinterpret:
          slots[s.out] = View(Filled(slots, s.base), s);
          break;
        case Step::kKernel: {
          PyObject* buffers[16];
          std::vector<PyObject*> many;
          PyObject** argv = buffers;
          if (s.slots.size() > 16) many.resize(s.slots.size()), argv = many.data();
          for (size_t i = 0; i < s.slots.size(); ++i) argv[i] = Filled(slots, s.slots[i]).ptr();
          RunCompiledKernel(*s.kernel, argv, s.slots.size());
          break;
        }
        case Step::kExtern:
          RunExtern(s, slots);
          break;
        case Step::kAsDeclared: {
          const py::object& t = Filled(slots, s.out);
          if (!IsTensor(t.ptr()) || UnpackTensor(t.ptr()).strides() != s.stride)
            slots[s.out] = s.fn(t, Tuple(s.size), Tuple(s.stride));
          break;
        }
        case Step::kRelease:
          for (int slot : s.slots) slots[slot] = py::object();
          break;
        case Step::kReturn: {
          py::tuple out(s.args.size());
          for (size_t i = 0; i < s.args.size(); ++i) out[i] = Materialize(s.args[i], slots);
          return std::move(out);
        }
      }
    }
    return py::tuple();
  }

  size_t NumSteps() const { return steps_.size(); }

 private:
  static std::string Repr(py::handle h) { return py::repr(h).cast<std::string>(); }

  static ScalarType DtypeOf(py::handle dtype) {
    KILN_CHECK_TYPE(IsDtype(dtype.ptr()), kOp, "dtype must be a kiln.dtype, got ", Repr(dtype));
    return reinterpret_cast<PyDtype*>(dtype.ptr())->scalar_type;
  }

  void CheckSlot(int slot, const char* what) const {
    KILN_CHECK_INDEX(slot >= 0 && slot < num_slots_, kOp, what, " names slot ", slot, ", outside [0, ", num_slots_,
                     ")");
  }

  ArgTemplate Template(py::handle h) const {
    ArgTemplate a;
    if (py::isinstance<Slot>(h)) {
      a.kind = ArgTemplate::kSlot;
      a.slot = h.cast<const Slot&>().index;
      CheckSlot(a.slot, "an argument");
      return a;
    }
    const bool list = PyList_CheckExact(h.ptr()), tuple = PyTuple_CheckExact(h.ptr());
    if (list || tuple) {
      bool any_slot = false;
      for (py::handle item : h) {
        a.items.push_back(Template(item));
        any_slot |= a.items.back().kind != ArgTemplate::kConst;
      }
      if (any_slot) {
        a.kind = list ? ArgTemplate::kList : ArgTemplate::kTuple;
        return a;
      }
      a.items.clear();
    }
    KILN_CHECK_TYPE(!PyDict_Check(h.ptr()) || !ContainsSlot(h), kOp, "a Slot inside a dict argument: ", Repr(h));
    a.value = py::reinterpret_borrow<py::object>(h);
    return a;
  }

  static bool ContainsSlot(py::handle h) {
    if (py::isinstance<Slot>(h)) return true;
    if (PyDict_Check(h.ptr())) {
      for (auto item : py::reinterpret_borrow<py::dict>(h))
        if (ContainsSlot(item.second)) return true;
      return false;
    }
    if (PyList_Check(h.ptr()) || PyTuple_Check(h.ptr()))
      for (py::handle item : h)
        if (ContainsSlot(item)) return true;
    return false;
  }

  // A slot's value where a step reads it; a program that reads a slot before writing it is a bug
  // in wrapper.py, raised rather than passed on as None.
  static const py::object& Filled(const std::vector<py::object>& slots, int slot) {
    const py::object& v = slots[slot];
    if (!v) throw Error(StrCat(kOp, "slot ", slot, " is read before it is written"));
    return v;
  }

  static py::object Materialize(const ArgTemplate& a, const std::vector<py::object>& slots) {
    switch (a.kind) {
      case ArgTemplate::kConst: return a.value;
      case ArgTemplate::kSlot: return Filled(slots, a.slot);
      case ArgTemplate::kList: {
        py::list out(a.items.size());
        for (size_t i = 0; i < a.items.size(); ++i) out[i] = Materialize(a.items[i], slots);
        return std::move(out);
      }
      case ArgTemplate::kTuple: {
        py::tuple out(a.items.size());
        for (size_t i = 0; i < a.items.size(); ++i) out[i] = Materialize(a.items[i], slots);
        return std::move(out);
      }
    }
    return py::none();
  }

  // A buffer, made as empty_strided would make it: under inference mode, an inference tensor
  // (the dispatcher's Autograd kernel marks factory results so; Note [Inference tensors])
  static py::object Allocate(const Step& s) {
    Tensor t = EmptyTensor(SymInts(s.size), s.dtype, Device(DeviceType::CPU), SymInts(s.stride));
    if (autograd::InferenceMode::is_enabled()) autograd::MarkInference(t);
    return py::reinterpret_steal<py::object>(WrapTensor(std::move(t)));
  }

  // reinterpret_tensor: a view of the base's storage in the step's layout, checked to fit it
  static py::object View(const py::object& base_obj, const Step& s) {
    KILN_CHECK_TYPE(IsTensor(base_obj.ptr()), kOp, "a view's base must be a kiln.Tensor, got ",
                    Py_TYPE(base_obj.ptr())->tp_name);
    return py::reinterpret_steal<py::object>(
        WrapTensor(ReinterpretTensor(UnpackTensor(base_obj.ptr()), s.size, s.stride, s.offset)));
  }

  static void RunExtern(const Step& s, std::vector<py::object>& slots) {
    std::vector<py::object> values;
    values.reserve(s.args.size());
    for (const ArgTemplate& a : s.args) values.push_back(Materialize(a, slots));
    std::vector<PyObject*> argv(values.size() + 1);
    for (size_t i = 0; i < values.size(); ++i) argv[i + 1] = values[i].ptr();
    const size_t nkw = s.kwnames ? PyTuple_GET_SIZE(s.kwnames.ptr()) : 0;
    PyObject* result = PyObject_Vectorcall(s.fn.ptr(), argv.data() + 1,
                                           (values.size() - nkw) | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                           s.kwnames ? s.kwnames.ptr() : nullptr);
    if (result == nullptr) throw py::error_already_set();
    py::object out = py::reinterpret_steal<py::object>(result);
    if (!s.unpack) {
      if (!s.slots.empty() && s.slots[0] != -1) slots[s.slots[0]] = std::move(out);
      return;
    }
    if (s.slots.empty() && out.is_none()) return;  // an op returning nothing ("-> ()": None)
    py::sequence items = py::reinterpret_borrow<py::sequence>(out);
    if (!PySequence_Check(out.ptr()) || items.size() != s.slots.size())
      throw Error(StrCat(kOp, Repr(s.fn), " returned ", Repr(out), ", expected ", s.slots.size(),
                                " results"));
    for (size_t i = 0; i < s.slots.size(); ++i)
      if (s.slots[i] != -1) slots[s.slots[i]] = items[i];
  }

  int num_slots_;
  std::vector<int> inputs_;
  std::vector<Step> statics_;              // reduce-overhead's buffers: layouts
  std::vector<py::object> static_values_;  // and, after the first call, the buffers
  std::vector<Step> steps_;
};

}  // namespace

void InitWrapperProgramBindings(py::module_& ind) {
  py::class_<Slot>(ind, "Slot", "A buffer's slot in a WrapperProgram, where an extern's argument or an output names it.")
      .def(py::init<int>(), py::arg("index"))
      .def_readonly("index", &Slot::index)
      .def("__repr__", [](const Slot& s) { return StrCat("Slot(", s.index, ")"); });
  py::class_<WrapperProgram>(ind, "WrapperProgram", py::dynamic_attr(),
                             "A lowered graph's wrapper as steps over numbered slots (Note [The wrapper program] in "
                             "python/csrc/python_wrapper_program.cc); call it with the list of inputs.")
      .def(py::init<int, std::vector<int>>(), py::arg("num_slots"), py::arg("inputs"))
      .def("static", &WrapperProgram::Static, py::arg("slot"), py::arg("size"), py::arg("stride"), py::arg("dtype"),
           "reduce-overhead: a buffer the first call allocates and every call reuses")
      .def("empty", &WrapperProgram::Empty, py::arg("slot"), py::arg("size"), py::arg("stride"), py::arg("dtype"))
      .def("reinterpret", &WrapperProgram::Reinterpret, py::arg("slot"), py::arg("base"), py::arg("size"),
           py::arg("stride"), py::arg("offset") = py::none(),
           "slot = a view of base's storage (offset: base's own when None)")
      .def("kernel", &WrapperProgram::Kernel, py::arg("compiled"), py::arg("slots"))
      .def("extern", &WrapperProgram::Extern, py::arg("fn"), py::arg("args"), py::arg("kwargs"), py::arg("results"),
           py::arg("unpack"),
           "fn(*args, **kwargs), Slots in them replaced by their values; its result (each item when unpack) into "
           "`results` (-1: dropped)")
      .def("as_declared", &WrapperProgram::AsDeclared, py::arg("slot"), py::arg("size"), py::arg("stride"),
           py::arg("copy"), "slot = copy(slot, size, stride) when its strides are not `stride`")
      .def("release", &WrapperProgram::Release, py::arg("slots"))
      .def("ret", &WrapperProgram::Return, py::arg("values"))
      .def("__call__", &WrapperProgram::Call, py::arg("args"))
      .def("__len__", &WrapperProgram::NumSteps)
      .def("__repr__", [](const WrapperProgram& p) {
        return StrCat("<kiln._C._inductor.WrapperProgram of ", p.NumSteps(), " steps>");
      });
}

}  // namespace kiln::python
