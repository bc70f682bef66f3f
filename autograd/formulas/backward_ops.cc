// autograd/formulas/backward_ops.cc: derivatives of the backward ops themselves, for double
// backward (create_graph=True) through activations, softmax and dropout. Each backward op is
// linear in its grad_output, whose gradient is the same backward op applied to the incoming grad.
#include "autograd/formulas/common.h"

namespace kiln::autograd {
using namespace formulas;

namespace {
constexpr double kPi = 3.14159265358979323846;

Tensor Same(const char* op, Ctx& c, std::initializer_list<IValue> rest) {
  Stack s{IValue(c.grad())};
  for (const IValue& v : rest) s.push_back(v);
  const Op& o = Registry::Get().FindOrThrow(op);
  o.Call(s);
  return s.at(0).to_tensor();
}

// d/dx of gelu'(x) (the second derivative), exact erf form or the tanh approximation.
Tensor GeluSecond(const Tensor& x, const std::string& approximate) {
  if (approximate == "tanh") {
    const double k = std::sqrt(2.0 / kPi), a = 0.044715;
    Tensor x2 = mul(x, x);
    Tensor u = mul(add(x, mul(mul(x2, x), a)), k);
    Tensor du = mul(add(mul(x2, 3.0 * a), 1.0), k);
    Tensor ddu = mul(x, 6.0 * a * k);
    Tensor t = CallOp<Tensor>(KILN_OP("aten::tanh"), u);
    Tensor sech2 = rsub(mul(t, t), 1);
    // g'' = sech2 * u' + 0.5 x (-2 t sech2 u'^2 + sech2 u'')
    Tensor inner = add(mul(mul(mul(t, sech2), mul(du, du)), -2.0), mul(sech2, ddu));
    return add(mul(sech2, du), mul(mul(x, inner), 0.5));
  }
  Tensor pdf = mul(exp(mul(mul(x, x), -0.5)), 1.0 / std::sqrt(2.0 * kPi));
  return mul(pdf, rsub(mul(x, x), 2));
}
}  // namespace

void DefineBackwardOpFormulas(DerivativeTable& d) {
  d.Def("sigmoid_backward", {"grad_output", "output"}, [](Ctx& c, Grads& g) {
    Tensor y = c.input("output");
    if (c.needs("grad_output")) g["grad_output"] = Same("aten::sigmoid_backward", c, {y});
    if (c.needs("output")) g["output"] = mul(mul(c.grad(), c.input("grad_output")), rsub(mul(y, 2.0), 1));
  });
  d.Def("tanh_backward", {"grad_output", "output"}, [](Ctx& c, Grads& g) {
    Tensor y = c.input("output");
    if (c.needs("grad_output")) g["grad_output"] = Same("aten::tanh_backward", c, {y});
    if (c.needs("output")) g["output"] = mul(mul(mul(c.grad(), c.input("grad_output")), y), -2.0);
  });
  d.Def("threshold_backward", {"self"}, [](Ctx& c, Grads& g) {
    if (c.needs("grad_output")) g["grad_output"] = Same("aten::threshold_backward", c, {c.input("self"), c.scalar("threshold")});
    if (c.needs("self")) g["self"] = zeros_like(c.grad());
  });
  d.Def("leaky_relu_backward", {"self"}, [](Ctx& c, Grads& g) {
    if (c.needs("grad_output"))
      g["grad_output"] = Same("aten::leaky_relu_backward", c,
                              {c.input("self"), c.scalar("negative_slope"), c.flag("self_is_result")});
    if (c.needs("self")) g["self"] = zeros_like(c.grad());
  });
  d.Def("hardtanh_backward", {"self"}, [](Ctx& c, Grads& g) {
    if (c.needs("grad_output"))
      g["grad_output"] = Same("aten::hardtanh_backward", c, {c.input("self"), c.scalar("min_val"), c.scalar("max_val")});
    if (c.needs("self")) g["self"] = zeros_like(c.grad());
  });
  d.Def("gelu_backward", {"grad_output", "self"}, [](Ctx& c, Grads& g) {
    std::string approximate = c.arg("approximate").to_string();
    Tensor x = c.input("self");
    if (c.needs("grad_output")) g["grad_output"] = Same("aten::gelu_backward", c, {x, approximate});
    if (c.needs("self")) g["self"] = mul(mul(c.grad(), c.input("grad_output")), GeluSecond(x, approximate));
  });
  d.Def("silu_backward", {"grad_output", "self"}, [](Ctx& c, Grads& g) {
    Tensor x = c.input("self");
    if (c.needs("grad_output")) g["grad_output"] = Same("aten::silu_backward", c, {x});
    if (c.needs("self")) {
      // silu'' = s(1-s)(2 + x(1-2s)) with s = sigmoid(x)
      Tensor s = sigmoid(x);
      Tensor second = mul(mul(s, rsub(s, 1)), add(mul(x, rsub(mul(s, 2.0), 1)), 2.0));
      g["self"] = mul(mul(c.grad(), c.input("grad_output")), second);
    }
  });
  d.Def("_softmax_backward_data", {"grad_output", "output"}, [](Ctx& c, Grads& g) {
    Tensor y = c.input("output"), go = c.input("grad_output");
    int64_t dim = c.i64("dim");
    Tensor grad = c.grad();
    if (c.needs("grad_output"))
      g["grad_output"] = CallOp<Tensor>(KILN_OP("aten::_softmax_backward_data"), grad, y, dim, c.dtype("output"));
    if (c.needs("output")) {
      Tensor s = sum(mul(go, y), {dim}, true);
      Tensor t = sum(mul(grad, y), {dim}, true);
      g["output"] = sub(mul(grad, sub(go, s)), mul(go, t));
    }
  });
  d.Def("_log_softmax_backward_data", {"grad_output", "output"}, [](Ctx& c, Grads& g) {
    Tensor out = c.input("output"), go = c.input("grad_output");
    int64_t dim = c.i64("dim");
    Tensor grad = c.grad();
    Tensor p = exp(out);
    if (c.needs("grad_output")) g["grad_output"] = sub(grad, sum(mul(grad, p), {dim}, true));
    if (c.needs("output")) g["output"] = neg(mul(mul(grad, p), sum(go, {dim}, true)));
  });
  d.Def("native_dropout_backward", {"mask"}, [](Ctx& c, Grads& g) {
    g["grad_output"] = Same("aten::native_dropout_backward", c, {c.input("mask"), c.f64("scale")});
  });
}

}  // namespace kiln::autograd
