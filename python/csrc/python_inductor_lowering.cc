// python/csrc/python_inductor_lowering.cc: kiln._C._inductor.lowering (inductor/lowering): which ops
// the lowering table has (Note [The lowering table] in inductor/lowering/registry.h; the C++ graph
// walk reads it, inductor/graph), the matmul template max-autotune times, and the pointwise
// builders tests and seeded bugs use (`make_pointwise` with a Python element function,
// `lower_elementwise`). inductor::lowering::Fallback reaches Python as
// kiln._inductor.lowering.Fallback (the node runs its eager kernel).
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "inductor/lowering/nn.h"
#include "inductor/lowering/pointwise.h"
#include "inductor/lowering/pointwise_ops.h"
#include "inductor/lowering/reductions.h"
#include "inductor/lowering/registry.h"
#include "inductor/lowering/views.h"
#include "python/csrc/arg_parser.h"
#include "python/csrc/python_inductor.h"
#include "python/csrc/python_tensor.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

using inductor::lowering::Operand;

// Python's exception classes, looked up once (a graph's lowering raises Fallback for every node
// that runs its eager kernel).
[[noreturn]] void Raise(const py::object& cls, const std::string& why) {
  PyErr_SetObject(cls.ptr(), py::str(why).ptr());
  throw py::error_already_set();
}

// kiln._inductor.lowering's class `name`, kept for the process's life.
const py::object& CommonClass(const char* name) {
  return *new py::object(py::module_::import("kiln._inductor.lowering").attr(name));
}

[[noreturn]] void RaiseFallback(const std::string& why) {
  static const py::object& cls = CommonClass("Fallback");
  Raise(cls, why);
}

// fn's result, with inductor::lowering::Fallback raised as Python's.
template <typename Fn>
auto Lowering(Fn&& fn) {
  try {
    return fn();
  } catch (const inductor::lowering::Fallback& e) {
    RaiseFallback(e.what());
  }
}

// A value of the graph or a Python number; anything else makes the node a fallback.
Operand OperandOf(const py::handle& o) {
  if (py::isinstance<inductor::ir::Value>(o)) return Operand{o.cast<std::shared_ptr<inductor::ir::Value>>(), Scalar()};
  Scalar s;
  if ((PyBool_Check(o.ptr()) || PyLong_Check(o.ptr()) || PyFloat_Check(o.ptr())) && ToScalar(o.ptr(), &s))
    return Operand{nullptr, s};
  PyErr_Clear();
  RaiseFallback(std::string("argument of type ") + Py_TYPE(o.ptr())->tp_name);
}

std::vector<Operand> OperandsOf(const py::handle& seq) {
  std::vector<Operand> out;
  for (const py::handle& o : seq) out.push_back(OperandOf(o));
  return out;
}

std::optional<codegen::DType> KernelTypeArg(const py::handle& name) {
  if (name.is_none()) return std::nullopt;
  codegen::DType t;
  const std::string s = name.cast<std::string>();
  if (!codegen::ParseDType(s, &t)) throw py::value_error("inductor lowering: unknown kernel dtype '" + s + "'");
  return t;
}

py::object LoadAsObject(const std::vector<std::optional<codegen::DType>>& load_as) {
  if (load_as.empty()) return py::none();
  py::list out;
  for (const auto& t : load_as) out.append(t ? py::object(py::str(codegen::DTypeName(*t))) : py::object(py::none()));
  return out;
}

}  // namespace

void InitInductorLoweringBindings(py::module_& inductor) {
  py::module_ m = inductor.def_submodule(
      "lowering", "Pointwise values from the registry's element functions (inductor/lowering, Note [Pointwise values]).");

  m.def("has_lowering", [](const std::string& op_name) {
          const Op* op = Registry::Get().Find(op_name);
          return op != nullptr && inductor::lowering::FindLowering(*op) != nullptr;
        }, py::arg("op"), "Whether the op (full name) has a lowering.");
  m.def("lowered_ops", [] {
          std::vector<std::string> names;
          for (const Op* op : inductor::lowering::LoweredOps()) names.push_back(op->name());
          return names;
        }, "The ops with a lowering, by full name.");
  m.def("make_pointwise",
        [](const std::string& name, const py::handle& dtype, std::vector<int64_t> shape, const py::handle& operands,
           const py::function& combine, const py::handle& compute, const py::handle& load_as) {
          return Lowering([&] {
            std::vector<std::optional<codegen::DType>> as;
            if (!load_as.is_none())
              for (const py::handle& t : load_as) as.push_back(KernelTypeArg(t));
            auto fn = [&](std::vector<codegen::ExprPtr> exprs) {
              py::tuple args(exprs.size());
              for (size_t i = 0; i < exprs.size(); ++i) {
                PyObject* e = WrapExpr(std::move(exprs[i]));
                if (e == nullptr) throw py::error_already_set();
                args[i] = py::reinterpret_steal<py::object>(e);
              }
              py::object r = combine(*args);
              return UnwrapExpr(r.ptr(), "a pointwise lowering's element function");
            };
            return inductor::lowering::MakePointwise(name, ScalarTypeArg(dtype, "a pointwise lowering's dtype"), std::move(shape), OperandsOf(operands), fn,
                                                     KernelTypeArg(compute), as);
          });
        },
        py::arg("name"), py::arg("dtype"), py::arg("shape"), py::arg("operands"), py::arg("combine"),
        py::arg("compute") = py::none(), py::arg("load_as") = py::none(),
        "A Pointwise computing combine(*operand exprs) over its operands (values or numbers) broadcast to shape, "
        "each read in load_as[i] or `compute` (the output's kernel dtype by default).");
  m.def("lower_elementwise",
        [](const std::string& op, const py::handle& dtype, std::vector<int64_t> shape, const py::handle& operands,
           const py::handle& alpha) {
          return Lowering([&] {
            std::optional<Scalar> a;
            if (!alpha.is_none()) a = OperandOf(alpha).number;
            return inductor::lowering::LowerElementwise(Registry::Get().FindOrThrow(op), ScalarTypeArg(dtype, "a pointwise lowering's dtype"), std::move(shape),
                                                        OperandsOf(operands), a);
          });
        },
        py::arg("op"), py::arg("dtype"), py::arg("shape"), py::arg("operands"), py::arg("alpha") = py::none(),
        "The op (full name) lowered from its element function over its operands (and alpha where not 1).");
  m.def("check_integer_divisor", [](const std::string& name, const py::handle& divisor) {
          Lowering([&] { inductor::lowering::CheckIntegerDivisor(name, OperandOf(divisor)); return 0; });
        }, py::arg("name"), py::arg("divisor"),
        "Raises Fallback for an integer division whose divisor may be 0 (Note [Integer division by zero]).");
  m.def("one_element_in_float", [](const py::handle& out_dtype, const py::handle& b) {
          return Lowering([&] { return LoadAsObject(inductor::lowering::OneElementInFloat(ScalarTypeArg(out_dtype, "one_element_in_float's out_dtype"), OperandOf(b))); });
        }, py::arg("out_dtype"), py::arg("b"),
        "load_as for (a, b) of a bfloat16 op reading a number or one-element b in float; None otherwise.");

  // the matmul template (inductor/lowering/nn.h): max-autotune's generated alternative, lowered
  // with the node's arguments as autotune decided
  using ValuePtr = std::shared_ptr<inductor::ir::Value>;
  m.def("matmul_template", [](const py::handle& dtype, const ValuePtr& a, const ValuePtr& b, const ValuePtr& bias,
                              double beta, double alpha) {
          return Lowering([&] {
            return inductor::lowering::MatmulTemplate(ScalarTypeArg(dtype, "the matmul template's dtype"), a, b, bias, beta, alpha);
          });
        }, py::arg("dtype"), py::arg("a"), py::arg("b"), py::arg("bias") = nullptr, py::arg("beta") = 1.0,
        py::arg("alpha") = 1.0, "alpha * a @ b (+ beta * bias) as a generated kernel (max-autotune's alternative).");
}

}  // namespace kiln::python
