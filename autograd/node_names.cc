// autograd/node_names.cc: PyTorch's backward node names (Note [Backward node names]).
#include "autograd/node_names.h"

#include <cctype>
#include <unordered_map>

namespace kiln::autograd {
namespace {

// The entries numbered above 0: their position among the derivatives.yaml entries of one name
// (PyTorch 2.13), for the overloads kiln has. Not add/sub/mul/div.Scalar: kiln's eager `x + 1`
// calls them where PyTorch's binds add.Tensor to a wrapped number (AddBackward0).
const std::unordered_map<std::string, int>& OverloadNumbers() {
  static const auto* numbers = new std::unordered_map<std::string, int>{
      {"acosh_", 1}, {"asinh_", 1}, {"atanh_", 1}, {"as_strided_", 1}, {"bernoulli_.Tensor", 1},
      {"bernoulli_.float", 2}, {"clamp", 1}, {"clamp_min.Tensor", 1}, {"clamp_max.Tensor", 1}, {"copysign.Scalar", 1}, {"div.Tensor_mode", 2},
      {"div.Scalar_mode", 3}, {"eq_.Tensor", 1}, {"fill.Tensor", 1}, {"fill_.Scalar", 2}, {"fill_.Tensor", 3},
      {"fmod.Tensor", 1}, {"ge_.Tensor", 1}, {"gt_.Tensor", 1}, {"le_.Tensor", 1}, {"lerp.Tensor", 1},
      {"xlogy.Scalar_Self", 1}, {"xlogy.Scalar_Other", 2}, {"lt_.Tensor", 1}, {"masked_fill.Tensor", 1}, {"max", 1},
      {"mean.dim", 1}, {"min", 1}, {"_native_batch_norm_legit.no_stats", 1}, {"ne_.Tensor", 1},
      {"norm.ScalarOpt_dim", 1}, {"norm.ScalarOpt_dtype", 2}, {"norm.ScalarOpt_dim_dtype", 3},
      {"pow.Tensor_Tensor", 1}, {"pow.Scalar", 2}, {"prod.dim_int", 1}, {"random_.to", 1}, {"random_", 2},
      {"remainder.Tensor", 1}, {"round.decimals", 1}, {"scatter.value", 1}, {"sort.stable", 1}, {"squeeze.dim", 1},
      {"squeeze.dims", 2}, {"rsub.Scalar", 1}, {"sum.dim_IntList", 1}, {"t_", 1},
      {"transpose_", 1}, {"elu_", 1}, {"leaky_relu_", 1}, {"threshold_", 1}};
  return *numbers;
}

// In-place ops PyTorch gives a derivatives.yaml entry of their own (the rest share their twin's).
bool HasOwnEntry(const std::string& name) { return OverloadNumbers().count(name) > 0; }

std::string OverloadName(const std::string& base, const std::string& overload) {
  return overload.empty() ? base : base + "." + overload;
}

// "nll_loss2d_forward" -> "NllLoss2DBackward": str.title() of each part, "Forward" dropped.
std::string CamelBackward(const std::string& base) {
  std::string out;
  bool after_letter = false;
  for (char ch : base) {
    if (ch == '_') { after_letter = false; continue; }
    const bool letter = std::isalpha(static_cast<unsigned char>(ch));
    out += letter && !after_letter ? static_cast<char>(std::toupper(static_cast<unsigned char>(ch))) : ch;
    after_letter = letter;
  }
  const std::string forward = "Forward";
  if (out.size() > forward.size() && out.compare(out.size() - forward.size(), forward.size(), forward) == 0)
    out.resize(out.size() - forward.size());
  return out + "Backward";
}

}  // namespace

std::string BackwardNodeName(const Op& op, const Op* functional) {
  std::string base = op.base_name();
  const std::string& overload = op.schema().overload;
  std::string key = OverloadName(base, overload);
  if (op.has_tag(Tag::inplace) && !base.empty() && base.back() == '_') {
    if (!HasOwnEntry(key)) {  // named as its functional twin
      if (functional != nullptr) return BackwardNodeName(*functional);
      key = OverloadName(base.substr(0, base.size() - 1), overload);
    }
    base.pop_back();
  }
  auto it = OverloadNumbers().find(key);
  return CamelBackward(base) + std::to_string(it == OverloadNumbers().end() ? 0 : it->second);
}

}  // namespace kiln::autograd
