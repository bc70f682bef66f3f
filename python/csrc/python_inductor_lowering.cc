// python/csrc/python_inductor_lowering.cc: kiln._C._inductor.lowering (inductor/lowering): pointwise
// values from the registry's element functions (Note [Pointwise values]), the view ops and the
// reductions. The Python lowerings (python/kiln/_inductor/lowering) call `lower_elementwise` for
// every op with an element function and `make_pointwise` with an element function of their own;
// inductor::lowering::Fallback reaches Python as kiln._inductor.lowering.common.Fallback (the node
// runs its eager kernel), ViewOfUnrealized as its subclass of that name.
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
#include "inductor/lowering/views.h"
#include "python/csrc/arg_parser.h"
#include "python/csrc/python_inductor.h"

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

// kiln._inductor.lowering.common's class `name`, kept for the process's life.
const py::object& CommonClass(const char* name) {
  return *new py::object(py::module_::import("kiln._inductor.lowering.common").attr(name));
}

[[noreturn]] void RaiseFallback(const std::string& why) {
  static const py::object& cls = CommonClass("Fallback");
  Raise(cls, why);
}

// fn's result, with inductor::lowering::Fallback (and ViewOfUnrealized) raised as Python's.
template <typename Fn>
auto Lowering(Fn&& fn) {
  try {
    return fn();
  } catch (const inductor::lowering::ViewOfUnrealized& e) {
    static const py::object& cls = CommonClass("ViewOfUnrealized");
    Raise(cls, e.what());
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

// A Python number argument (Fallback for anything else: a tensor, a symbolic size).
Scalar NumberOf(const py::handle& o) {
  Operand op = OperandOf(o);
  if (op.is_value()) RaiseFallback("a tensor where a number is expected");
  return op.number;
}

std::optional<Scalar> OptionalNumberOf(const py::handle& o) {
  if (o.is_none()) return std::nullopt;
  return NumberOf(o);
}

std::optional<double> OptionalDoubleOf(const py::handle& o) {
  if (o.is_none()) return std::nullopt;
  return NumberOf(o).to_double();
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
  m.def("lower_with_params",
        [](const std::string& op_name, const py::handle& dtype, std::vector<int64_t> shape, const py::handle& x,
           const py::tuple& params, const py::dict& kwargs) {
          return Lowering([&] {
            const Op& op = Registry::Get().FindOrThrow(op_name);
            const PointwiseIr* ir = FindPointwiseIr(op);
            KILN_CHECK_VALUE(ir != nullptr, "inductor: ", op_name, " has no element function");
            std::vector<std::optional<double>> values;
            try {
              values = PointwiseParams(op, *ir, params, kwargs);
            } catch (const TypeError& e) {  // a number argument that is not a number here (a symbolic one)
              throw inductor::lowering::Fallback(e.what());
            }
            return inductor::lowering::LowerWithParams(op, ScalarTypeArg(dtype, "a pointwise lowering's dtype"), std::move(shape),
                                                       OperandOf(x), values);
          });
        },
        py::arg("op"), py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("params"), py::arg("kwargs"),
        "The op (full name; elu, leaky_relu, ...) lowered from its element function with its number arguments "
        "(positional `params`, `kwargs` by name, else their defaults) as constants.");
  m.def("check_integer_divisor", [](const std::string& name, const py::handle& divisor) {
          Lowering([&] { inductor::lowering::CheckIntegerDivisor(name, OperandOf(divisor)); return 0; });
        }, py::arg("name"), py::arg("divisor"),
        "Raises Fallback for an integer division whose divisor may be 0 (Note [Integer division by zero]).");
  m.def("one_element_in_float", [](const py::handle& out_dtype, const py::handle& b) {
          return Lowering([&] { return LoadAsObject(inductor::lowering::OneElementInFloat(ScalarTypeArg(out_dtype, "one_element_in_float's out_dtype"), OperandOf(b))); });
        }, py::arg("out_dtype"), py::arg("b"),
        "load_as for (a, b) of a bfloat16 op reading a number or one-element b in float; None otherwise.");

  // Note [Views as index maps]: each view op given the output's dtype and shape, its input, its arguments
  using ValuePtr = std::shared_ptr<inductor::ir::Value>;
  m.def("permute", [](const py::handle& dtype, std::vector<int64_t> shape, const ValuePtr& x, const std::vector<int64_t>& dims) {
          return inductor::lowering::Permute(x, ScalarTypeArg(dtype, "permute's dtype"), std::move(shape), dims);
        }, py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("dims"));
  m.def("transpose", [](const py::handle& dtype, std::vector<int64_t> shape, const ValuePtr& x, int64_t a, int64_t b) {
          return inductor::lowering::Transpose(x, ScalarTypeArg(dtype, "transpose's dtype"), std::move(shape), a, b);
        }, py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("a"), py::arg("b"));
  m.def("expand", [](const py::handle& dtype, std::vector<int64_t> shape, const ValuePtr& x) {
          return inductor::lowering::Expand(x, ScalarTypeArg(dtype, "expand's dtype"), std::move(shape));
        }, py::arg("dtype"), py::arg("shape"), py::arg("x"));
  m.def("unsqueeze", [](const py::handle& dtype, std::vector<int64_t> shape, const ValuePtr& x, int64_t dim) {
          return inductor::lowering::Unsqueeze(x, ScalarTypeArg(dtype, "unsqueeze's dtype"), std::move(shape), dim);
        }, py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("dim"));
  m.def("squeeze", [](const py::handle& dtype, std::vector<int64_t> shape, const ValuePtr& x,
                      std::optional<std::vector<int64_t>> dims) {
          return inductor::lowering::Squeeze(x, ScalarTypeArg(dtype, "squeeze's dtype"), std::move(shape), dims);
        }, py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("dims") = py::none());
  m.def("slice", [](const py::handle& dtype, std::vector<int64_t> shape, const ValuePtr& x, int64_t dim,
                    std::optional<int64_t> start, int64_t step) {
          return inductor::lowering::Slice(x, ScalarTypeArg(dtype, "slice's dtype"), std::move(shape), dim, start, step);
        }, py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("dim"), py::arg("start"), py::arg("step"));
  m.def("view", [](const py::handle& dtype, std::vector<int64_t> shape, const ValuePtr& x) {
          return Lowering([&] { return inductor::lowering::View(x, ScalarTypeArg(dtype, "view's dtype"), std::move(shape)); });
        }, py::arg("dtype"), py::arg("shape"), py::arg("x"),
        "view/reshape: x for its own shape, a strided view of a Buffer view() allows (ViewOfUnrealized otherwise).");
  m.def("select", [](const py::handle& dtype, std::vector<int64_t> shape, const ValuePtr& x, int64_t dim, int64_t index) {
          return inductor::lowering::Select(x, ScalarTypeArg(dtype, "select's dtype"), std::move(shape), dim, index);
        }, py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("dim"), py::arg("index"));

  // reductions (inductor/lowering/reductions.h): each given the graph's context (None outside a
  // graph), the output's dtype and shape, its input and its arguments
  using inductor::lowering::Dims;
  using inductor::lowering::GraphContext;
  py::class_<GraphContext>(m, "GraphContext",
                           "What one graph's lowerings share: its scheduler, and the means its variances computed.")
      .def(py::init<inductor::scheduler::Scheduler*>(), py::arg("scheduler"), py::keep_alive<1, 2>());
  m.def("reduce", [](GraphContext* graph, const std::string& name, const py::handle& dtype, std::vector<int64_t> shape,
                     const ValuePtr& x, Dims dims, bool keepdim) {
          return Lowering([&] {
            return inductor::lowering::LowerReduce(graph, name, ScalarTypeArg(dtype, "a reduction's dtype"), std::move(shape), x, dims, keepdim);
          });
        }, py::arg("graph"), py::arg("name"), py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("dims"),
        py::arg("keepdim"), "sum, mean, amax, amin, prod, or max/min over every element, along dims (None: all).");
  m.def("any_all", [](GraphContext* graph, bool any, const py::handle& dtype, std::vector<int64_t> shape,
                      const ValuePtr& x, Dims dims, bool keepdim) {
          return Lowering([&] {
            return inductor::lowering::LowerAnyAll(graph, any, ScalarTypeArg(dtype, "any's dtype"), std::move(shape), x, dims, keepdim);
          });
        }, py::arg("graph"), py::arg("any"), py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("dims"),
        py::arg("keepdim"));
  m.def("count_nonzero", [](GraphContext* graph, const py::handle& dtype, std::vector<int64_t> shape, const ValuePtr& x,
                            Dims dims) {
          return Lowering([&] {
            return inductor::lowering::LowerCountNonzero(graph, ScalarTypeArg(dtype, "count_nonzero's dtype"), std::move(shape), x, dims);
          });
        }, py::arg("graph"), py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("dims"));
  m.def("arg_reduce", [](bool max, const py::handle& dtype, std::vector<int64_t> shape, const ValuePtr& x,
                         std::optional<int64_t> dim, bool keepdim) {
          return Lowering([&] {
            return inductor::lowering::LowerArgReduce(max, ScalarTypeArg(dtype, "argmax's dtype"), std::move(shape), x, dim, keepdim);
          });
        }, py::arg("max"), py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("dim"), py::arg("keepdim"));
  m.def("logsumexp", [](GraphContext* graph, const py::handle& dtype, std::vector<int64_t> shape, const ValuePtr& x,
                        Dims dims, bool keepdim) {
          return Lowering([&] {
            return inductor::lowering::LowerLogsumexp(graph, ScalarTypeArg(dtype, "logsumexp's dtype"), std::move(shape), x, dims, keepdim);
          });
        }, py::arg("graph"), py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("dims"), py::arg("keepdim"));
  m.def("vector_norm", [](GraphContext* graph, const py::handle& dtype, std::vector<int64_t> shape, const ValuePtr& x,
                          double ord, Dims dims, bool keepdim) {
          return Lowering([&] {
            return inductor::lowering::LowerVectorNorm(graph, ScalarTypeArg(dtype, "vector_norm's dtype"), std::move(shape), x, ord, dims,
                                                       keepdim);
          });
        }, py::arg("graph"), py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("ord"), py::arg("dims"),
        py::arg("keepdim"));
  m.def("var", [](GraphContext* graph, bool std, const py::handle& dtype, std::vector<int64_t> shape, const ValuePtr& x,
                  Dims dims, std::optional<double> correction, bool keepdim) {
          return Lowering([&] {
            const ScalarType t = ScalarTypeArg(dtype, std ? "std's dtype" : "var's dtype");
            return std ? inductor::lowering::LowerStd(graph, t, std::move(shape), x, dims, correction, keepdim)
                       : inductor::lowering::LowerVar(graph, t, std::move(shape), x, dims, correction, keepdim);
          });
        }, py::arg("graph"), py::arg("std"), py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("dims"),
        py::arg("correction"), py::arg("keepdim"), "The variance (std: its square root) along dims (None: all).");
  m.def("softmax", [](GraphContext* graph, bool log, const py::handle& dtype, std::vector<int64_t> shape,
                      const ValuePtr& x, int64_t dim) {
          return Lowering([&] {
            return inductor::lowering::LowerSoftmax(graph, log, ScalarTypeArg(dtype, "softmax's dtype"), std::move(shape), x, dim);
          });
        }, py::arg("graph"), py::arg("log"), py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("dim"));

  // library-kernel ops (inductor/lowering/nn.h)
  m.def("matmul_template", [](const py::handle& dtype, const ValuePtr& a, const ValuePtr& b, const ValuePtr& bias,
                              double beta, double alpha) {
          return Lowering([&] {
            return inductor::lowering::MatmulTemplate(ScalarTypeArg(dtype, "the matmul template's dtype"), a, b, bias, beta, alpha);
          });
        }, py::arg("dtype"), py::arg("a"), py::arg("b"), py::arg("bias") = nullptr, py::arg("beta") = 1.0,
        py::arg("alpha") = 1.0, "alpha * a @ b (+ beta * bias) as a generated kernel (max-autotune's alternative).");
  m.def("max_pool2d_with_indices", [](GraphContext* graph, const py::handle& values_dtype, std::vector<int64_t> values_shape,
                                      const py::handle& indices_dtype, std::vector<int64_t> indices_shape,
                                      const ValuePtr& x, std::vector<int64_t> kernel, std::vector<int64_t> stride,
                                      std::vector<int64_t> padding, std::vector<int64_t> dilation, bool ceil_mode) {
          return Lowering([&] {
            return inductor::lowering::MaxPool2dWithIndices(
                graph, ScalarTypeArg(values_dtype, "max_pool2d's dtype"), std::move(values_shape),
                ScalarTypeArg(indices_dtype, "max_pool2d's indices dtype"), std::move(indices_shape), x, kernel, stride,
                padding, dilation, ceil_mode);
          });
        }, py::arg("graph"), py::arg("values_dtype"), py::arg("values_shape"), py::arg("indices_dtype"),
        py::arg("indices_shape"), py::arg("x"), py::arg("kernel"), py::arg("stride"), py::arg("padding"),
        py::arg("dilation"), py::arg("ceil_mode"));
  m.def("max_pool2d_with_indices_backward", [](GraphContext* graph, const py::handle& dtype, std::vector<int64_t> shape,
                                               const ValuePtr& grad, const ValuePtr& x, std::vector<int64_t> kernel,
                                               std::vector<int64_t> stride, std::vector<int64_t> padding,
                                               std::vector<int64_t> dilation, const ValuePtr& indices) {
          return Lowering([&] {
            return inductor::lowering::MaxPool2dWithIndicesBackward(graph, ScalarTypeArg(dtype, "max_pool2d_backward's dtype"),
                                                                    std::move(shape), grad, x, kernel, stride, padding,
                                                                    dilation, indices);
          });
        }, py::arg("graph"), py::arg("dtype"), py::arg("shape"), py::arg("grad"), py::arg("x"), py::arg("kernel"),
        py::arg("stride"), py::arg("padding"), py::arg("dilation"), py::arg("indices"));

  // pointwise ops beyond the registry's rows (inductor/lowering/pointwise_ops.h); operands are
  // values or numbers
  namespace lw = inductor::lowering;
  using Shape = std::vector<int64_t>;
  auto dtype_of = [](const py::handle& dtype) { return ScalarTypeArg(dtype, "a pointwise lowering's dtype"); };
  m.def("pow", [=](const py::handle& dtype, Shape shape, const py::handle& a, const py::handle& b) {
          return Lowering([&] { return lw::LowerPow(dtype_of(dtype), std::move(shape), OperandOf(a), OperandOf(b)); });
        }, py::arg("dtype"), py::arg("shape"), py::arg("a"), py::arg("b"));
  m.def("where", [=](const py::handle& dtype, Shape shape, const py::handle& cond, const py::handle& a, const py::handle& b) {
          return Lowering([&] {
            return lw::LowerWhere(dtype_of(dtype), std::move(shape), OperandOf(cond), OperandOf(a), OperandOf(b));
          });
        }, py::arg("dtype"), py::arg("shape"), py::arg("cond"), py::arg("a"), py::arg("b"));
  m.def("gelu", [=](const py::handle& dtype, Shape shape, const py::handle& x, const std::string& approximate) {
          return Lowering([&] { return lw::LowerGelu(dtype_of(dtype), std::move(shape), OperandOf(x), approximate); });
        }, py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("approximate"));
  m.def("gelu_backward", [=](const py::handle& dtype, Shape shape, const py::handle& grad, const py::handle& x,
                             const std::string& approximate) {
          return Lowering([&] {
            return lw::LowerGeluBackward(dtype_of(dtype), std::move(shape), OperandOf(grad), OperandOf(x), approximate);
          });
        }, py::arg("dtype"), py::arg("shape"), py::arg("grad"), py::arg("x"), py::arg("approximate"));
  m.def("activation_backward", [=](const std::string& name, const py::handle& dtype, Shape shape, const py::handle& grad,
                                   const py::handle& x, const py::handle& threshold) {
          return Lowering([&] {
            return lw::LowerActivationBackward(name, dtype_of(dtype), std::move(shape), OperandOf(grad), OperandOf(x),
                                               threshold.is_none() ? Scalar() : NumberOf(threshold));
          });
        }, py::arg("name"), py::arg("dtype"), py::arg("shape"), py::arg("grad"), py::arg("x"),
        py::arg("threshold") = py::none(), "silu_backward, sigmoid_backward, tanh_backward or threshold_backward.");
  m.def("clamp", [=](const py::handle& dtype, Shape shape, const py::handle& x, const py::handle& min,
                     const py::handle& max) {
          return Lowering([&] {
            return lw::LowerClamp(dtype_of(dtype), std::move(shape), OperandOf(x), OptionalNumberOf(min), OptionalNumberOf(max));
          });
        }, py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("min"), py::arg("max"));
  m.def("div_mode", [=](const py::handle& dtype, Shape shape, const py::handle& a, const py::handle& b,
                        std::optional<std::string> rounding_mode) {
          return Lowering([&] {
            return lw::LowerDivMode(dtype_of(dtype), std::move(shape), OperandOf(a), OperandOf(b), rounding_mode);
          });
        }, py::arg("dtype"), py::arg("shape"), py::arg("a"), py::arg("b"), py::arg("rounding_mode"));
  m.def("round_decimals", [=](const py::handle& dtype, Shape shape, const py::handle& x, int64_t decimals) {
          return Lowering([&] { return lw::LowerRoundDecimals(dtype_of(dtype), std::move(shape), OperandOf(x), decimals); });
        }, py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("decimals"));
  m.def("nan_to_num", [=](const py::handle& dtype, Shape shape, const py::handle& x, const py::handle& nan,
                          const py::handle& posinf, const py::handle& neginf) {
          return Lowering([&] {
            return lw::LowerNanToNum(dtype_of(dtype), std::move(shape), OperandOf(x), OptionalDoubleOf(nan),
                                     OptionalDoubleOf(posinf), OptionalDoubleOf(neginf));
          });
        }, py::arg("dtype"), py::arg("shape"), py::arg("x"), py::arg("nan"), py::arg("posinf"), py::arg("neginf"));
  m.def("copy", [=](const py::handle& dtype, Shape shape, const py::handle& x) {
          return Lowering([&] { return lw::LowerCopy(dtype_of(dtype), std::move(shape), OperandOf(x)); });
        }, py::arg("dtype"), py::arg("shape"), py::arg("x"));
  m.def("fill", [=](const std::string& name, const py::handle& dtype, Shape shape, const py::handle& value) {
          return Lowering([&] { return lw::LowerFill(name, dtype_of(dtype), std::move(shape), NumberOf(value)); });
        }, py::arg("name"), py::arg("dtype"), py::arg("shape"), py::arg("value"));
}

}  // namespace kiln::python
