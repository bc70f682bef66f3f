// tensor/ops/out_variants.cc: out= overloads for functional ops that have no hand-written one.
//
// For an op `f(args) -> Tensor` without an `.out` overload, registers
// `f.<overload>_out(args, *, Tensor(a!) out) -> Tensor(a!)`, whose kernel runs `f` through the
// dispatcher, resizes `out` to the result (PyTorch's rules: a wrong-sized out is resized, a
// dtype the result cannot be cast to is an error) and copies into it. Registered after every
// family, so each op declares only its functional form and `out=` comes for free. Most backward
// ops get PyTorch's name for it instead: `f.grad_input(args, *, Tensor(a!) grad_input)`.
#include <set>
#include <string>

#include "tensor/ops/common.h"

namespace kiln {
namespace {

void OutVariantKernel(const Op&, DispatchKeySet, Stack& stack, void* ctx) {
  const Op& functional = *static_cast<const Op*>(ctx);
  Tensor out = stack.back().to_tensor();
  stack.pop_back();
  functional.Call(stack);
  const Tensor& result = stack.at(0).to_tensor();
  ResizeOut(functional.base_name().c_str(), out,
            TensorMeta{result->sym_sizes(), {}, result.dtype(), result.device()});
  ops::copy_(out, result);
  stack.clear();
  stack.emplace_back(out);
}

// Backward ops whose out= overload PyTorch names `grad_input` (the argument too), the ones it gives
// none, and '_'-prefixed ones that do get an `out` overload.
const std::set<std::string> kGradInputNamed = {
    "threshold_backward", "gelu_backward", "sigmoid_backward", "tanh_backward", "silu_backward",
    "leaky_relu_backward", "hardtanh_backward", "elu_backward", "softplus_backward", "hardsigmoid_backward",
    "logit_backward", "nll_loss_backward", "nll_loss2d_backward", "max_pool2d_with_indices_backward",
    "avg_pool2d_backward", "mse_loss_backward", "smooth_l1_loss_backward", "binary_cross_entropy_backward"};
// (Two keep the overload name `out` but call the argument `grad_input`.)
const std::set<std::string> kGradInputArgOnly = {"_softmax_backward_data", "huber_loss_backward"};
const std::set<std::string> kNoOutVariant = {"mish_backward"};
const std::set<std::string> kPrivateWithOut = {"_softmax_backward_data", "_log_softmax_backward_data",
                                               "_adaptive_avg_pool2d_backward"};

bool WantsOutVariant(const Op& op, const OpPacket& packet) {
  const FunctionSchema& s = op.schema();
  if (kNoOutVariant.count(op.base_name())) return false;
  if ((op.base_name().front() == '_' && !kPrivateWithOut.count(op.base_name())) || op.base_name().back() == '_')
    return false;
  if (s.is_mutable() || op.has_tag(Tag::view) || s.returns_tuple || s.returns.size() != 1) return false;
  if (s.returns[0].kind != TypeKind::Tensor || !s.returns[0].alias.set.empty()) return false;
  if (s.overload.size() >= 3 && s.overload.substr(s.overload.size() - 3) == "out") return false;
  bool has_tensor_input = false;
  for (const Argument& a : s.arguments)
    has_tensor_input = has_tensor_input || a.kind == TypeKind::Tensor || a.kind == TypeKind::TensorList;
  if (!has_tensor_input) return false;  // factories: PyTorch's out= there is rarely used
  for (Op* other : packet.overloads) {
    const std::string& o = other->schema().overload;
    if (o == "out" || o == s.overload + "_out") return false;  // hand-written already
  }
  return true;
}

}  // namespace

void RegisterOutVariants(Registry& r) {
  std::vector<std::pair<Op*, std::string>> todo;
  for (const auto& packet : r.packets()) {
    for (Op* op : packet->overloads) {
      if (!WantsOutVariant(*op, *packet)) continue;
      std::string text = op->schema().str();  // "aten::sum.dim_IntList(...) -> Tensor"
      text = text.substr(text.find("::") + 2);
      const std::string& overload = op->schema().overload;
      const bool grad_input = overload.empty() && kGradInputNamed.count(op->base_name());
      const std::string out_name = grad_input ? "grad_input" : "out";
      const std::string arg_name = grad_input || kGradInputArgOnly.count(op->base_name()) ? "grad_input" : "out";
      std::string head = op->base_name() + "." + (overload.empty() ? out_name : overload + "_out");
      std::string args = text.substr(text.find('('));
      args = args.substr(0, args.rfind(')'));                      // "(Tensor self, ..."
      bool has_kwonly = args.find("*") != std::string::npos;
      std::string sep = args == "(" ? "" : ", ";
      todo.emplace_back(op, head + args + sep + (has_kwonly ? "" : "*, ") + "Tensor(a!) " + arg_name +
                                ") -> Tensor(a!)");
    }
  }
  for (auto& [op, schema] : todo) {
    OpDef def = r.Def(schema, {}, kFunction);
    def.op()->SetComposite(Kernel{&OutVariantKernel, op});
  }
}

}  // namespace kiln
