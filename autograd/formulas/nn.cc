// autograd/formulas/nn.cc: derivatives of convolution, pooling, normalization, losses, embedding
// and dropout. Each calls its backward op (tensor/ops/nn_backward.cc), so traced backward graphs
// hold aten-level nodes such as convolution_backward.
#include "autograd/formulas/common.h"

namespace kiln::autograd {
using namespace formulas;

namespace {
using Tensor3 = std::tuple<Tensor, Tensor, Tensor>;
constexpr int64_t kMean = 1, kNone = 0;

std::vector<bool> Mask(Ctx& c, std::initializer_list<const char*> names) {
  std::vector<bool> m;
  for (const char* n : names) m.push_back(c.needs(n));
  return m;
}

// A pointwise loss's elementwise gradient scaled by the incoming gradient and the reduction.
Tensor ReduceScale(const Tensor& elementwise, Ctx& c, int64_t reduction, const SymDimVector& sizes) {
  Tensor g = c.grad();
  if (reduction == kNone) return mul(elementwise, g);
  Tensor out = mul(elementwise, expand(g, sizes));
  if (reduction == kMean) {
    SymInt n = 1;
    for (const SymInt& s : sizes) n = n * s;
    out = div(out, static_cast<double>(n.expect_int()));
  }
  return out;
}

void SetNormGrads(Grads& g, const Tensor3& r, const char* input, const char* weight, const char* bias) {
  if (std::get<0>(r).defined()) g[input] = std::get<0>(r);
  if (std::get<1>(r).defined()) g[weight] = std::get<1>(r);
  if (std::get<2>(r).defined()) g[bias] = std::get<2>(r);
}

// native_batch_norm and its _legit spellings: (input, weight, bias, [running stats], training).
void BatchNormBackward(Ctx& c, Grads& g, bool has_running, bool training) {
  // Training normalizes with the batch statistics (save_mean/save_invstd): the running ones,
  // which the forward itself updated, are not read (nor version-checked).
  Tensor rm = has_running && !training ? c.input("running_mean") : Tensor();
  Tensor rv = has_running && !training ? c.input("running_var") : Tensor();
  auto r = CallOp<Tensor3>(KILN_OP("aten::native_batch_norm_backward"), c.grad(0), c.input("input"),
                           OptTensor(c.input("weight")), rm.defined() ? OptTensor(rm) : OptTensor(),
                           rv.defined() ? OptTensor(rv) : OptTensor(), OptTensor(c.result(1)),
                           OptTensor(c.result(2)), training, c.f64("eps"), Mask(c, {"input", "weight", "bias"}));
  SetNormGrads(g, r, "input", "weight", "bias");
}

OptTensor Opt(const Tensor& t) { return t.defined() ? OptTensor(t) : OptTensor(); }
}  // namespace

void DefineNNFormulas(DerivativeTable& d) {
  d.Def("convolution", {"input", "weight"}, [](Ctx& c, Grads& g) {
    std::optional<SymList> bias_sizes;
    if (c.needs("bias")) bias_sizes = c.sizes_list("bias");
    auto r = CallOp<Tensor3>(KILN_OP("aten::convolution_backward"), c.grad(), c.input("input"), c.input("weight"),
                             bias_sizes, c.symints("stride"), c.symints("padding"), c.symints("dilation"),
                             c.flag("transposed"), c.symints("output_padding"), c.arg("groups").to_symint(),
                             Mask(c, {"input", "weight", "bias"}));
    SetNormGrads(g, r, "input", "weight", "bias");
  });
  d.Def("max_pool2d_with_indices", {"self", "result1"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::max_pool2d_with_indices_backward"), c.grad(0), c.input("self"),
                               c.ints("kernel_size"), c.ints("stride"), c.ints("padding"), c.ints("dilation"),
                               c.flag("ceil_mode"), c.result(1));
  });
  d.Def("avg_pool2d", {"self"}, [](Ctx& c, Grads& g) {
    const IValue& div_override = c.arg("divisor_override");
    g["self"] = CallOp<Tensor>(KILN_OP("aten::avg_pool2d_backward"), c.grad(), c.input("self"), c.ints("kernel_size"),
                               c.ints("stride"), c.ints("padding"), c.flag("ceil_mode"), c.flag("count_include_pad"),
                               div_override.is_none() ? std::optional<int64_t>() : std::optional<int64_t>(div_override.to_int()));
  });
  d.Def("_adaptive_avg_pool2d", {"self"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::_adaptive_avg_pool2d_backward"), c.grad(), c.input("self"));
  });
  d.Def("native_batch_norm", {"input", "weight", "running_mean", "running_var", "result1", "result2"},
        [](Ctx& c, Grads& g) { BatchNormBackward(c, g, true, c.flag("training")); });
  d.Def("_native_batch_norm_legit", {"input", "weight", "running_mean", "running_var", "result1", "result2"},
        [](Ctx& c, Grads& g) { BatchNormBackward(c, g, true, c.flag("training")); });
  d.Def("_native_batch_norm_legit.no_stats", {"input", "weight", "result1", "result2"},
        [](Ctx& c, Grads& g) { BatchNormBackward(c, g, false, c.flag("training")); });
  d.Def("_native_batch_norm_legit_no_training", {"input", "weight", "running_mean", "running_var", "result1", "result2"},
        [](Ctx& c, Grads& g) { BatchNormBackward(c, g, true, false); });
  d.Def("_native_batch_norm_legit_functional", {"input", "weight", "running_mean", "running_var", "result1", "result2"},
        [](Ctx& c, Grads& g) { BatchNormBackward(c, g, true, c.flag("training")); });
  d.Def("native_layer_norm", {"input", "weight", "bias", "result1", "result2"}, [](Ctx& c, Grads& g) {
    auto r = CallOp<Tensor3>(KILN_OP("aten::native_layer_norm_backward"), c.grad(0), c.input("input"),
                             c.symints("normalized_shape"), c.result(1), c.result(2), Opt(c.input("weight")),
                             Opt(c.input("bias")), Mask(c, {"input", "weight", "bias"}));
    SetNormGrads(g, r, "input", "weight", "bias");
  });
  d.Def("native_group_norm", {"input", "weight", "result1", "result2"}, [](Ctx& c, Grads& g) {
    auto r = CallOp<Tensor3>(KILN_OP("aten::native_group_norm_backward"), c.grad(0), c.input("input"), c.result(1),
                             c.result(2), Opt(c.input("weight")), c.arg("N").to_symint(), c.arg("C").to_symint(),
                             c.arg("HxW").to_symint(), c.i64("group"), Mask(c, {"input", "weight", "bias"}));
    SetNormGrads(g, r, "input", "weight", "bias");
  });
  // Note [Flash attention on the CPU] (tensor/ops/attention.cc): the backward recomputes the
  // scores from the saved logsumexp. Neither logsumexp nor the mask has a gradient, as in PyTorch
  // (F.scaled_dot_product_attention takes the math path for a mask that requires grad).
  d.Def("_scaled_dot_product_flash_attention_for_cpu", {"query", "key", "value", "attn_mask", "result", "result1"},
        [](Ctx& c, Grads& g) {
          auto [dq, dk, dv] = CallOp<Tensor3>(
              KILN_OP("aten::_scaled_dot_product_flash_attention_for_cpu_backward"), c.grad(0), c.input("query"),
              c.input("key"), c.input("value"), c.result(0), c.result(1), c.f64("dropout_p"), c.flag("is_causal"),
              Opt(c.input("attn_mask")), c.is_none("scale") ? std::optional<double>() : c.f64("scale"));
          g["query"] = dq;
          g["key"] = dk;
          g["value"] = dv;
        });
  d.NotDifferentiableIn("_scaled_dot_product_flash_attention_for_cpu", {"attn_mask"});
  d.NotDifferentiableOutputs("_scaled_dot_product_flash_attention_for_cpu", {1});
  d.Def("nll_loss_forward", {"self", "target", "weight", "result1"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::nll_loss_backward"), c.grad(0), c.input("self"), c.input("target"),
                               Opt(c.input("weight")), c.i64("reduction"), c.arg("ignore_index").to_symint(),
                               c.result(1));
  });
  // The target's gradient is the same backward with self and target swapped, as PyTorch's
  // derivatives.yaml has it: it comes in the target's dtype (a float32 target of a float16 input
  // gets a float32 gradient, not the input's negated float16 one).
  d.Def("mse_loss", {"self", "target"}, [](Ctx& c, Grads& g) {
    const Tensor self = c.input("self"), target = c.input("target");
    const Op& op = KILN_OP("aten::mse_loss_backward");
    if (c.needs("self")) g["self"] = CallOp<Tensor>(op, c.grad(), self, target, c.i64("reduction"));
    if (c.needs("target")) g["target"] = CallOp<Tensor>(op, c.grad(), target, self, c.i64("reduction"));
  });
  d.Def("smooth_l1_loss", {"self", "target"}, [](Ctx& c, Grads& g) {
    const Tensor self = c.input("self"), target = c.input("target");
    const Op& op = KILN_OP("aten::smooth_l1_loss_backward");
    if (c.needs("self")) g["self"] = CallOp<Tensor>(op, c.grad(), self, target, c.i64("reduction"), c.f64("beta"));
    if (c.needs("target")) g["target"] = CallOp<Tensor>(op, c.grad(), target, self, c.i64("reduction"), c.f64("beta"));
  });
  d.Def("huber_loss", {"self", "target"}, [](Ctx& c, Grads& g) {
    const Tensor self = c.input("self"), target = c.input("target");
    const Op& op = KILN_OP("aten::huber_loss_backward");
    if (c.needs("self")) g["self"] = CallOp<Tensor>(op, c.grad(), self, target, c.i64("reduction"), c.f64("delta"));
    if (c.needs("target")) g["target"] = CallOp<Tensor>(op, c.grad(), target, self, c.i64("reduction"), c.f64("delta"));
  });
  d.Def("binary_cross_entropy", {"self", "target", "weight"}, [](Ctx& c, Grads& g) {
    Tensor self = c.input("self"), target = c.input("target"), weight = c.input("weight");
    if (c.needs("self"))
      g["self"] = CallOp<Tensor>(KILN_OP("aten::binary_cross_entropy_backward"), c.grad(), self, target,
                                 Opt(weight), c.i64("reduction"));
    if (c.needs("target")) {
      Tensor e = sub(log(rsub(self, 1)), log(self));
      if (weight.defined()) e = mul(e, weight);
      g["target"] = ReduceScale(e, c, c.i64("reduction"), c.sizes("self"));
    }
  });
  d.Def("binary_cross_entropy_with_logits", {"self", "target", "weight", "pos_weight"}, [](Ctx& c, Grads& g) {
    Tensor x = c.input("self"), y = c.input("target"), w = c.input("weight"), pw = c.input("pos_weight");
    int64_t reduction = c.i64("reduction");
    if (c.needs("self")) {
      Tensor e;
      if (pw.defined()) {
        Tensor py = mul(pw, y);
        e = sub(mul(sigmoid(x), add(rsub(y, 1), py)), py);
      } else {
        e = sub(sigmoid(x), y);
      }
      if (w.defined()) e = mul(e, w);
      g["self"] = ReduceScale(e, c, reduction, c.sizes("self"));
    }
    if (c.needs("target")) {
      // d/dy = pw * softplus(-x) - softplus(x)
      auto softplus = [](const Tensor& t) {
        return CallOp<Tensor>(KILN_OP("aten::softplus"), t, Scalar(1), Scalar(20));
      };
      Tensor a = softplus(neg(x));
      Tensor e = sub(pw.defined() ? mul(pw, a) : a, softplus(x));
      if (w.defined()) e = mul(e, w);
      g["target"] = ReduceScale(e, c, reduction, c.sizes("self"));
    }
  });
  d.NotDifferentiableIn("nll_loss_forward", {"weight"});
  d.NotDifferentiableIn("binary_cross_entropy", {"weight"});
  d.NotDifferentiableIn("binary_cross_entropy_with_logits", {"weight", "pos_weight"});
  d.Def("embedding", {"indices"}, [](Ctx& c, Grads& g) {
    g["weight"] = CallOp<Tensor>(KILN_OP("aten::embedding_dense_backward"), c.grad(), c.input("indices"),
                                 c.sizes("weight")[0], c.arg("padding_idx").to_symint(), c.flag("scale_grad_by_freq"));
  });
  d.Def("native_dropout", {"result1"}, [](Ctx& c, Grads& g) {
    const IValue& train = c.arg("train");
    double p = c.f64("p");
    const bool training = train.is_none() || train.to_bool();
    double scale = !training ? 1.0 : (p == 1.0 ? 0.0 : 1.0 / (1.0 - p));
    g["input"] = CallOp<Tensor>(KILN_OP("aten::native_dropout_backward"), c.grad(0), c.result(1), scale);
  });
}

}  // namespace kiln::autograd
