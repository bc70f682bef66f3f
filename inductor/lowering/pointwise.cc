// inductor/lowering/pointwise.cc: pointwise values and the element-function lowering (pointwise.h).
#include "inductor/lowering/pointwise.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "inductor/lowering/lazy.h"
#include "tensor/ops/pointwise_ir.h"
#include "tensor/type_promotion.h"

namespace kiln::inductor::lowering {
namespace {

using codegen::DType;
using codegen::Expr;
using codegen::ExprPtr;
using ir::Affine;

ScalarType Join(ScalarType a, ScalarType b) {
  if (a == ScalarType::Undefined) return b;
  if (b == ScalarType::Undefined) return a;
  return PromoteTypes(a, b);
}


// An op's element function for operands of these kernel types: its expression (operand i a load
// of buffer i), the type it computes in, and its flags; built once per (op, types).
struct Function {
  ExprPtr expr;
  DType compute;
  bool integer_division, reads_scalar_in_opmath;
};

const Function& FunctionOf(const Op& op, const PointwiseIr& ir, const std::vector<DType>& types,
                           const std::vector<std::optional<double>>& params = {}) {
  static std::mutex mu;
  // the number arguments by their bits: a NaN slope is a key like any other (NaN < NaN is no order)
  static auto* cache = new std::map<std::tuple<const Op*, std::vector<DType>, std::vector<std::optional<uint64_t>>>, Function>;
  std::vector<std::optional<uint64_t>> bits;
  for (const std::optional<double>& p : params) bits.push_back(p ? std::optional<uint64_t>(std::bit_cast<uint64_t>(*p)) : std::nullopt);
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_tuple(&op, types, std::move(bits));
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  std::vector<ScalarType> scalar_types;
  std::vector<ExprPtr> operands;
  for (size_t i = 0; i < types.size(); ++i) {
    scalar_types.push_back(ir::ScalarTypeOfKernel(types[i]));
    operands.push_back(Expr::Load(static_cast<int>(i), codegen::Index{}));
  }
  const ScalarType compute = ir.compute(scalar_types);
  ExprPtr e = ir.build_with_params ? ir.build_with_params(std::move(operands), compute, DeviceType::CPU, params)
                                    : ir.build(std::move(operands), compute, DeviceType::CPU);
  Function f{std::move(e), ir::KernelDType(compute), ir.integer_division, ir.reads_scalar_in_opmath};
  return cache->emplace(std::move(key), std::move(f)).first->second;
}

}  // namespace

// Note [Integer division by zero]: eager raises `RuntimeError: ZeroDivisionError` for an integer
// (or bool) //, %, fmod or rounding division by zero, as PyTorch does; a kernel cannot raise, and
// returned 0 instead. Such an op by a tensor divisor runs eager's kernel (an extern call, which
// raises), and one by a constant 0 too; by a nonzero constant it stays fused. Float division by
// zero is inf or NaN, never an error, so floats keep the fused path.
void CheckIntegerDivisor(const std::string& name, const Operand& divisor) {
  if (divisor.is_value())
    throw Fallback(StrCat(name, " of integers by a tensor (a zero divisor raises ZeroDivisionError)"));
  if (divisor.number.to_complex() == std::complex<double>(0))
    throw Fallback(StrCat(name, " of integers by 0 (eager raises ZeroDivisionError)"));
}

// Note [16-bit floats times a scalar] (tensor/ops/binary.cc): a bfloat16 op whose `other` is a
// Python number or a one-element value reads it in float, unrounded; the op stays a bfloat16 one,
// computed in float32 and rounded where it is stored, as PyTorch's Inductor keeps it.
std::vector<std::optional<DType>> OneElementInFloat(ScalarType out, const Operand& b) {
  if (ir::KernelDType(out) != DType::BF16) return {};
  if (!b.is_value()) return {std::nullopt, DType::F32};
  const auto& shape = b.value->shape();
  if (std::all_of(shape.begin(), shape.end(), [](int64_t s) { return s == 1; })) return {std::nullopt, DType::F32};
  return {};
}

ExprPtr Constant(const Scalar& number, DType dtype) {
  switch (dtype) {
    case DType::Bool: return Expr::ConstInt(number.to_bool() ? 1 : 0, dtype);
    case DType::I64:
    case DType::I32:
    case DType::I16:
    case DType::I8:
    case DType::U8: return Expr::ConstInt(number.to_int(), dtype);
    default: return Expr::Const(number.to_double(), dtype);
  }
}

std::shared_ptr<Pointwise> MakePointwise(const std::string& name, ScalarType dtype, std::vector<int64_t> shape,
                                         const std::vector<Operand>& operands,
                                         const std::function<ExprPtr(std::vector<ExprPtr>)>& combine,
                                         std::optional<DType> compute, const std::vector<std::optional<DType>>& load_as) {
  const DType out_type = ir::KernelDType(dtype);
  const DType computes_in = compute.value_or(out_type);
  // each operand's kernel type first: a dtype kernels cannot hold makes this node a fallback
  for (const Operand& o : operands)
    if (o.is_value()) ir::KernelDType(o.value->dtype());
  Trace trace;
  const Indices idx = Variables(shape.size());
  std::vector<ExprPtr> exprs;
  std::set<std::string> ops{name};
  std::vector<ir::LoopSpace> spaces;
  for (size_t i = 0; i < operands.size(); ++i) {
    const DType as = i < load_as.size() && load_as[i] ? *load_as[i] : computes_in;
    const Operand& o = operands[i];
    if (!o.is_value()) {
      exprs.push_back(Constant(o.number, as));
      continue;
    }
    const Value& v = *o.value;
    exprs.push_back(trace.Read(o.value, BroadcastIndices(idx, v.shape(), shape), as));
    ops.insert(v.ops.begin(), v.ops.end());
    if (v.kind() == Value::Kind::kPointwise) {
      const auto& pw = static_cast<const Pointwise&>(v);
      if (pw.space && v.shape() == shape && std::find(spaces.begin(), spaces.end(), *pw.space) == spaces.end())
        spaces.push_back(*pw.space);
    }
  }
  ExprPtr value = combine(std::move(exprs));
  KILN_CHECK_VALUE(value != nullptr, "inductor: ", name, "'s element function gave no expression");
  // Note [bfloat16 rounds at every op]: the value is cast to a bfloat16 output's type even where it
  // computes in bfloat16 (Note [Pointwise values])
  if (computes_in != out_type || out_type == DType::BF16) value = Expr::Cast(value, out_type);
  auto out = std::make_shared<Pointwise>(dtype, std::move(shape), trace.Finish(std::move(value)));
  out->ops = std::move(ops);
  if (spaces.size() == 1) out->space = spaces[0];  // operands of other loops disagree: none
  return out;
}

DType Promoted(const Operand& a, const Operand& b) {
  ResultTypeState s;
  for (const Operand* o : {&a, &b}) {
    if (!o->is_value()) {
      s.Update(o->number);
    } else if (o->value->shape().empty()) {
      s.zero_result = Join(s.zero_result, o->value->dtype());
    } else {
      s.dim_result = Join(s.dim_result, o->value->dtype());
    }
  }
  return ir::KernelDType(s.Result());
}

std::shared_ptr<Pointwise> LowerElementwise(const Op& op, ScalarType dtype, std::vector<int64_t> shape,
                                            std::vector<Operand> operands, std::optional<Scalar> alpha) {
  const PointwiseIr* ir = FindPointwiseIr(op);
  KILN_CHECK_VALUE(ir != nullptr && ir->num_params == 0, "inductor: ", op.name(),
                   " has no element function without number arguments");
  KILN_CHECK_VALUE(static_cast<int>(operands.size()) == ir->arity, "inductor: ", op.name(), " reads ", ir->arity,
                   " operands, got ", operands.size());
  std::vector<DType> types;
  if (operands.size() == 1) {
    KILN_CHECK_VALUE(operands[0].is_value(), "inductor: ", op.name(), "'s operand is no tensor");
    types = {ir::KernelDType(operands[0].value->dtype())};
  } else {
    types.assign(2, Promoted(operands[0], operands[1]));
    if (alpha && alpha->to_complex() != std::complex<double>(1)) {
      KILN_CHECK_VALUE(ir->has_alpha, "inductor: ", op.name(), " takes no alpha");
      operands.push_back(Operand{nullptr, *alpha});
      types.push_back(types[0]);
    }
  }
  const Function& f = FunctionOf(op, *ir, types);
  if (f.integer_division && !IsFloat(f.compute)) CheckIntegerDivisor(op.base_name(), operands[1]);
  std::vector<std::optional<DType>> load_as;
  if (f.reads_scalar_in_opmath && operands.size() >= 2) load_as = OneElementInFloat(dtype, operands[1]);
  const ExprPtr function = f.expr;
  if (f.compute == DType::Bool) {
    // bools add and multiply as integers (True + True is 2 in the IR), and the value is a bool
    // again only where it is stored: read by a cast (`(b + b).float()`) it was 2.0
    return MakePointwise(op.base_name(), dtype, std::move(shape), operands,
                         [&](std::vector<ExprPtr> xs) { return Expr::Cast(codegen::SubstituteLoads(function, xs), DType::Bool); },
                         DType::Bool, load_as);
  }
  return MakePointwise(op.base_name(), dtype, std::move(shape), operands,
                       [&](std::vector<ExprPtr> xs) { return codegen::SubstituteLoads(function, xs); }, f.compute, load_as);
}

std::shared_ptr<Pointwise> LowerWithParams(const Op& op, ScalarType dtype, std::vector<int64_t> shape, const Operand& x,
                                           const std::vector<std::optional<double>>& params) {
  const PointwiseIr* ir = FindPointwiseIr(op);
  KILN_CHECK_VALUE(ir != nullptr && ir->num_params == static_cast<int>(params.size()) && ir->arity == 1, "inductor: ",
                   op.name(), " has no element function of one operand and ", params.size(), " number arguments");
  if (!x.is_value()) throw Fallback(StrCat(op.name(), " of a number"));
  const Function& f = FunctionOf(op, *ir, {ir::KernelDType(x.value->dtype())}, params);
  const ExprPtr function = f.expr;
  return MakePointwise(op.base_name(), dtype, std::move(shape), {x},
                       [&](std::vector<ExprPtr> xs) { return codegen::SubstituteLoads(function, xs); }, f.compute);
}

}  // namespace kiln::inductor::lowering
