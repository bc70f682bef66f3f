// inductor/lowering/registry.cc: the lowering table (Note [The lowering table] in registry.h):
// each lowered op's arguments, read by name, handed to its lowering in pointwise*.h, views.h,
// reductions.h or nn.h.
#include "inductor/lowering/registry.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "inductor/lowering/nn.h"
#include "inductor/lowering/pointwise_ops.h"
#include "inductor/lowering/views.h"
#include "runtime/error.h"
#include "tensor/ops/pointwise_ir.h"

namespace kiln::inductor::lowering {

LoweringArg LoweringArg::Of(std::shared_ptr<ir::Value> v) {
  LoweringArg a;
  a.kind = Kind::kValue;
  a.value = std::move(v);
  return a;
}
LoweringArg LoweringArg::Number(const Scalar& s) {
  LoweringArg a;
  a.kind = Kind::kNumber;
  a.number = s;
  return a;
}
LoweringArg LoweringArg::Ints(std::vector<int64_t> v) {
  LoweringArg a;
  a.kind = Kind::kInts;
  a.ints = std::move(v);
  return a;
}
LoweringArg LoweringArg::String(std::string s) {
  LoweringArg a;
  a.kind = Kind::kString;
  a.text = std::move(s);
  return a;
}
LoweringArg LoweringArg::Constant(const IValue& v) {
  if (v.is_none()) return None();
  if (v.is_bool() || v.is_int() || v.is_double()) return Number(v.to_scalar());
  // a SymInt parameter's default (slice's step=1) or a concrete size: a number like any int
  if (v.is_symint()) return v.to_symint().is_symbolic() ? Other("a symbolic size") : Number(Scalar(v.to_int()));
  if (const auto* s = std::get_if<std::string>(&v.variant())) return String(*s);
  if (const auto* l = std::get_if<std::vector<SymInt>>(&v.variant())) {
    std::vector<int64_t> ints;
    for (const SymInt& i : *l) {
      if (i.is_symbolic()) return Other("a symbolic size");
      ints.push_back(i.expect_int());
    }
    return Ints(std::move(ints));
  }
  return Other(v.type_name());
}

LoweringArg LoweringArg::Other(std::string what) {
  LoweringArg a;
  a.kind = Kind::kOther;
  a.text = std::move(what);
  return a;
}

LoweringCall::LoweringCall(const Op& op, std::vector<LoweringOutput> outs, std::vector<LoweringArg> args,
                           GraphContext* graph)
    : op_(op), outs_(std::move(outs)), args_(std::move(args)), graph_(graph) {
  KILN_CHECK_VALUE(args_.size() == op_.schema().arguments.size(), "inductor: ", op_.name(), " takes ",
                   op_.schema().arguments.size(), " arguments, got ", args_.size());
  KILN_CHECK_VALUE(!outs_.empty(), "inductor: ", op_.name(), ": no result to lower into");
}

namespace {

// The position of the schema's argument `name`, or -1.
int IndexOf(const Op& op, const char* name) {
  const std::vector<Argument>& args = op.schema().arguments;
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].name == name) return static_cast<int>(i);
  return -1;
}

const char* KindName(const LoweringArg& a) {
  switch (a.kind) {
    case LoweringArg::Kind::kNone: return "None";
    case LoweringArg::Kind::kValue: return "a tensor";
    case LoweringArg::Kind::kNumber: return "a number";
    case LoweringArg::Kind::kInts: return "an int list";
    case LoweringArg::Kind::kString: return "a string";
    case LoweringArg::Kind::kOther: return a.text.c_str();
  }
  return "?";
}

}  // namespace

bool LoweringCall::Has(const char* name) const { return IndexOf(op_, name) >= 0; }

bool LoweringCall::IsNone(const char* name) const {
  const int i = IndexOf(op_, name);
  return i < 0 || args_[i].kind == LoweringArg::Kind::kNone;
}

const LoweringArg& LoweringCall::Get(const char* name) const {
  const int i = IndexOf(op_, name);
  KILN_INTERNAL_ASSERT(i >= 0, "inductor: ", op_.name(), " has no argument '", name, "'");
  return args_[i];
}

void LoweringCall::Unfit(const char* name, const char* expected) const {
  throw Fallback(StrCat(op_.name(), "'s argument '", name, "' is ", KindName(Get(name)), ", not ", expected));
}

ValuePtr LoweringCall::Value(const char* name) const {
  const LoweringArg& a = Get(name);
  if (a.kind != LoweringArg::Kind::kValue) Unfit(name, "a value of the graph");
  return a.value;
}

Operand LoweringCall::OperandAt(size_t i) const {
  const LoweringArg& a = args_.at(i);
  if (a.kind == LoweringArg::Kind::kValue) return Operand{a.value, Scalar()};
  if (a.kind == LoweringArg::Kind::kNumber) return Operand{nullptr, a.number};
  throw Fallback(StrCat(op_.name(), "'s argument '", op_.schema().arguments[i].name, "' is ", KindName(a),
                        ", not a value or a number"));
}

Operand LoweringCall::OperandOf(const char* name) const {
  const int i = IndexOf(op_, name);
  KILN_INTERNAL_ASSERT(i >= 0, "inductor: ", op_.name(), " has no argument '", name, "'");
  return OperandAt(i);
}

Scalar LoweringCall::Number(const char* name) const {
  const LoweringArg& a = Get(name);
  if (a.kind != LoweringArg::Kind::kNumber) Unfit(name, "a number");
  return a.number;
}

std::optional<Scalar> LoweringCall::OptionalNumber(const char* name) const {
  if (IsNone(name)) return std::nullopt;
  return Number(name);
}

int64_t LoweringCall::Int(const char* name) const {
  const LoweringArg& a = Get(name);
  if (a.kind != LoweringArg::Kind::kNumber || !a.number.is_integral()) Unfit(name, "an int");
  return a.number.to_int();
}

std::optional<int64_t> LoweringCall::OptionalInt(const char* name) const {
  if (IsNone(name)) return std::nullopt;
  return Int(name);
}

std::vector<int64_t> LoweringCall::Ints(const char* name) const {
  const LoweringArg& a = Get(name);
  if (a.kind == LoweringArg::Kind::kInts) return a.ints;
  if (a.kind == LoweringArg::Kind::kNumber && a.number.is_integral()) return {a.number.to_int()};
  Unfit(name, "an int list");
}

Dims LoweringCall::OptionalInts(const char* name) const {
  if (IsNone(name)) return std::nullopt;
  return Ints(name);
}

std::string LoweringCall::Str(const char* name) const {
  const LoweringArg& a = Get(name);
  if (a.kind != LoweringArg::Kind::kString) Unfit(name, "a string");
  return a.text;
}

std::optional<std::string> LoweringCall::OptionalStr(const char* name) const {
  if (IsNone(name)) return std::nullopt;
  return Str(name);
}

bool LoweringCall::Flag(const char* name) const { return Has(name) && Bool(name); }

bool LoweringCall::Bool(const char* name) const {
  const LoweringArg& a = Get(name);
  if (a.kind != LoweringArg::Kind::kNumber) Unfit(name, "a bool");
  return a.number.to_bool();
}

namespace {

using Table = std::unordered_map<const Op*, LoweringFn>;
using Values = std::vector<ValuePtr>;

// The op's name without "aten::" and its overload (silu_backward, for its kernel's name).
const std::string& BaseName(const LoweringCall& c) { return c.op().base_name(); }

// A pointwise lowering's result: one value of the node's dtype and shape.
template <typename Fn>
LoweringFn Pointwise1(Fn fn) {
  return [fn](const LoweringCall& c) -> Values { return {fn(c, c.out().dtype, c.out().shape)}; };
}

// Every op whose element function is kernel IR (Note [Pointwise ops as kernel IR]): its tensor
// operands first (alpha, where the op has it), or its number arguments after them as constants.
void AddElementFunctions(Table& t) {
  for (const Op* op : OpsWithPointwiseIr()) {
    const PointwiseIr* ir = FindPointwiseIr(*op);
    if (ir->num_params > 0) {
      t[op] = Pointwise1([ir](const LoweringCall& c, ScalarType dtype, std::vector<int64_t> shape) {
        std::vector<std::optional<double>> params;
        for (int i = 0; i < ir->num_params; ++i) {
          const LoweringArg& a = c.args().at(ir->arity + i);
          if (a.kind == LoweringArg::Kind::kNone) params.emplace_back(std::nullopt);
          else if (a.kind == LoweringArg::Kind::kNumber) params.emplace_back(a.number.to_double());
          else throw Fallback(StrCat(c.op().name(), "'s number argument ", i, " is ", KindName(a)));
        }
        return LowerWithParams(c.op(), dtype, std::move(shape), c.OperandAt(0), params);
      });
      continue;
    }
    t[op] = Pointwise1([ir](const LoweringCall& c, ScalarType dtype, std::vector<int64_t> shape) {
      std::vector<Operand> operands;
      for (int i = 0; i < ir->arity; ++i) operands.push_back(c.OperandAt(i));
      std::optional<Scalar> alpha;
      if (ir->has_alpha && c.Has("alpha")) alpha = c.OptionalNumber("alpha");
      return LowerElementwise(c.op(), dtype, std::move(shape), std::move(operands), alpha);
    });
  }
}

// Registers `fn` for the listed overloads ("pow.Tensor_Scalar", "gelu" for the default one);
// overloads kiln's registry lacks are skipped.
void Add(Table& t, std::initializer_list<const char*> names, const LoweringFn& fn) {
  for (const char* name : names)
    if (const Op* op = Registry::Get().Find(StrCat("aten::", name))) t[op] = fn;
}

void AddPointwiseOps(Table& t) {
  Add(t, {"pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return LowerPow(d, std::move(s), c.OperandAt(0), c.OperandAt(1));
      }));
  Add(t, {"where.self"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return LowerWhere(d, std::move(s), c.OperandOf("condition"), c.OperandOf("self"), c.OperandOf("other"));
      }));
  Add(t, {"gelu"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return LowerGelu(d, std::move(s), c.OperandOf("self"), c.Str("approximate"));
      }));
  Add(t, {"gelu_backward"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return LowerGeluBackward(d, std::move(s), c.OperandAt(0), c.OperandAt(1), c.Str("approximate"));
      }));
  // silu_backward(grad, x), sigmoid_backward(grad, y), tanh_backward(grad, y), threshold_backward(grad, x, t)
  Add(t, {"silu_backward", "sigmoid_backward", "tanh_backward", "threshold_backward"},
      Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return LowerActivationBackward(BaseName(c), d, std::move(s), c.OperandAt(0), c.OperandAt(1),
                                       c.Has("threshold") ? c.Number("threshold") : Scalar());
      }));
  // clamp(self, min, max) with numbers or tensors as bounds, either absent (None)
  Add(t, {"clamp", "clamp.Tensor"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        auto bound = [&](const char* name) {
          return c.IsNone(name) ? std::nullopt : std::optional<Operand>(c.OperandOf(name));
        };
        return LowerClamp(d, std::move(s), c.OperandOf("self"), bound("min"), bound("max"));
      }));
  Add(t, {"clamp_min", "clamp_min.Tensor"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return LowerClamp(d, std::move(s), c.OperandOf("self"), c.OperandOf("min"), std::nullopt);
      }));
  Add(t, {"clamp_max", "clamp_max.Tensor"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return LowerClamp(d, std::move(s), c.OperandOf("self"), std::nullopt, c.OperandOf("max"));
      }));
  Add(t, {"div.Tensor_mode", "div.Scalar_mode"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return LowerDivMode(d, std::move(s), c.OperandAt(0), c.OperandAt(1), c.OptionalStr("rounding_mode"));
      }));
  Add(t, {"round.decimals"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return LowerRoundDecimals(d, std::move(s), c.OperandOf("self"), c.Int("decimals"));
      }));
  Add(t, {"nan_to_num"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        auto opt = [&](const char* name) -> std::optional<double> {
          const std::optional<Scalar> v = c.OptionalNumber(name);
          return v ? std::optional<double>(v->to_double()) : std::nullopt;
        };
        return LowerNanToNum(d, std::move(s), c.OperandOf("self"), opt("nan"), opt("posinf"), opt("neginf"));
      }));
  Add(t, {"clone", "_to_copy", "alias", "lift_fresh_copy"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return LowerCopy(d, std::move(s), c.OperandOf("self"));
      }));
  // copy(self, src), a functionalized copy_: src broadcast to self's shape, in self's dtype
  Add(t, {"copy"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return LowerCopy(d, std::move(s), c.OperandOf("src"));
      }));
  // constant fills: fill(self, value), full(size, fill_value), scalar_tensor(s), *_like(self)
  Add(t, {"fill.Scalar"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return LowerFill("fill", d, std::move(s), c.Number("value"));
      }));
  Add(t, {"full"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return LowerFill("full", d, std::move(s), c.Number("fill_value"));
      }));
  Add(t, {"scalar_tensor"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto) {
        return LowerFill("scalar_tensor", d, {}, c.Number("s"));
      }));
  Add(t, {"zeros_like"}, Pointwise1([](const LoweringCall&, ScalarType d, auto s) {
        return LowerFill("full", d, std::move(s), Scalar(int64_t{0}));
      }));
  Add(t, {"ones_like"}, Pointwise1([](const LoweringCall&, ScalarType d, auto s) {
        return LowerFill("full", d, std::move(s), Scalar(int64_t{1}));
      }));
  Add(t, {"full_like"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return LowerFill("full", d, std::move(s), c.Number("fill_value"));
      }));
}

// Note [Views as index maps] (views.h): of a Buffer a strided Buffer over the same memory, of a
// lazy value a Pointwise reading it through the map.
void AddViews(Table& t) {
  Add(t, {"permute"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return Permute(c.Value("self"), d, std::move(s), c.Ints("dims"));
      }));
  Add(t, {"t"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        const ValuePtr x = c.Value("self");
        std::vector<int64_t> dims(x->shape().size());
        for (size_t i = 0; i < dims.size(); ++i) dims[i] = static_cast<int64_t>(dims.size() - 1 - i);
        return Permute(x, d, std::move(s), dims);
      }));
  Add(t, {"transpose.int"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return Transpose(c.Value("self"), d, std::move(s), c.Int("dim0"), c.Int("dim1"));
      }));
  Add(t, {"expand"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return Expand(c.Value("self"), d, std::move(s));
      }));
  Add(t, {"unsqueeze"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return Unsqueeze(c.Value("self"), d, std::move(s), c.Int("dim"));
      }));
  Add(t, {"squeeze.dim", "squeeze.dims", "squeeze"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return Squeeze(c.Value("self"), d, std::move(s), c.Has("dim") ? c.OptionalInts("dim") : std::nullopt);
      }));
  Add(t, {"slice.Tensor"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return Slice(c.Value("self"), d, std::move(s), c.Int("dim"), c.OptionalInt("start"), c.Int("step"));
      }));
  Add(t, {"select.int"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return Select(c.Value("self"), d, std::move(s), c.Int("dim"), c.Int("index"));
      }));
  // a strided view of a buffer whose layout allows it; ViewOfUnrealized otherwise (graph.py
  // realizes x and lowers the node again)
  Add(t, {"view", "_unsafe_view", "reshape"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return View(c.Value("self"), d, std::move(s));
      }));
}

void AddReductions(Table& t) {
  // sum, mean, amax, amin over `dim` (sum.default: every element)
  const auto reduce = [](std::string kind) {
    return Pointwise1([kind](const LoweringCall& c, ScalarType d, auto s) {
      return LowerReduce(c.graph(), kind, d, std::move(s), c.Value("self"), c.OptionalInts("dim"), c.Flag("keepdim"));
    });
  };
  Add(t, {"sum.dim_IntList", "sum"}, reduce("sum"));
  Add(t, {"mean.dim"}, reduce("mean"));
  Add(t, {"amax"}, reduce("amax"));
  Add(t, {"amin"}, reduce("amin"));
  Add(t, {"max"}, reduce("max"));  // over every element
  Add(t, {"min"}, reduce("min"));
  Add(t, {"prod.dim_int", "prod"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        const Dims dims = c.Has("dim") ? Dims(std::vector<int64_t>{c.Int("dim")}) : std::nullopt;
        return LowerReduce(c.graph(), "prod", d, std::move(s), c.Value("self"), dims, c.Flag("keepdim"));
      }));
  for (const bool any : {true, false}) {
    const LoweringFn fn = Pointwise1([any](const LoweringCall& c, ScalarType d, auto s) {
      return LowerAnyAll(c.graph(), any, d, std::move(s), c.Value("self"), c.OptionalInts("dim"),
                         c.Flag("keepdim"));
    });
    if (any) Add(t, {"any", "any.dim", "any.dims"}, fn);
    else Add(t, {"all", "all.dim", "all.dims"}, fn);
  }
  Add(t, {"count_nonzero.dim_IntList", "count_nonzero"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return LowerCountNonzero(c.graph(), d, std::move(s), c.Value("self"), c.OptionalInts("dim"));
      }));
  for (const bool max : {true, false}) {
    Add(t, {max ? "argmax" : "argmin"}, Pointwise1([max](const LoweringCall& c, ScalarType d, auto s) {
          return LowerArgReduce(max, d, std::move(s), c.Value("self"), c.OptionalInt("dim"), c.Bool("keepdim"));
        }));
    // max.dim / min.dim: (amax or amin, argmax or argmin) along one axis, two reductions of the
    // same loop (one kernel when both are realized together)
    Add(t, {max ? "max.dim" : "min.dim"}, [max](const LoweringCall& c) -> Values {
      const ValuePtr x = c.Value("self");
      const int64_t dim = c.Int("dim");
      const bool keepdim = c.Bool("keepdim");
      const LoweringOutput& values = c.outs().at(0);
      const LoweringOutput& indices = c.outs().at(1);
      ValuePtr v = LowerReduce(c.graph(), max ? "amax" : "amin", values.dtype, values.shape, x, std::vector<int64_t>{dim},
                               keepdim);
      return {v, LowerArgReduce(max, indices.dtype, indices.shape, x, dim, keepdim)};
    });
  }
  Add(t, {"logsumexp"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return LowerLogsumexp(c.graph(), d, std::move(s), c.Value("self"), c.OptionalInts("dim"), c.Bool("keepdim"));
      }));
  Add(t, {"linalg_vector_norm"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        return LowerVectorNorm(c.graph(), d, std::move(s), c.Value("self"), c.Number("ord").to_double(),
                               c.OptionalInts("dim"), c.Bool("keepdim"));
      }));
  for (const bool std : {false, true}) {
    Add(t, {std ? "std.correction" : "var.correction"}, Pointwise1([std](const LoweringCall& c, ScalarType d, auto s) {
          const std::optional<Scalar> correction = c.OptionalNumber("correction");
          const std::optional<double> corr = correction ? std::optional<double>(correction->to_double()) : std::nullopt;
          const ValuePtr x = c.Value("self");
          const Dims dims = c.OptionalInts("dim");
          const bool keepdim = c.Bool("keepdim");
          return std ? LowerStd(c.graph(), d, std::move(s), x, dims, corr, keepdim)
                     : LowerVar(c.graph(), d, std::move(s), x, dims, corr, keepdim);
        }));
  }
  for (const bool log : {false, true}) {
    Add(t, {log ? "_log_softmax" : "_softmax"}, Pointwise1([log](const LoweringCall& c, ScalarType d, auto s) {
          return LowerSoftmax(c.graph(), log, d, std::move(s), c.Value("self"), c.Int("dim"));
        }));
  }
}

// A pooling node's kernel_size, stride, padding and dilation, two values each (an int, or a list
// of one, is both; an empty stride is the kernel's).
struct PoolWindow {
  std::vector<int64_t> kernel, stride, padding, dilation;
};
PoolWindow PoolWindowOf(const LoweringCall& c) {
  auto pair = [&](const char* name) {
    std::vector<int64_t> v = c.Ints(name);
    if (v.size() == 1) v.push_back(v[0]);
    return v;
  };
  PoolWindow w{pair("kernel_size"), pair("stride"), pair("padding"), pair("dilation")};
  if (w.stride.empty()) w.stride = w.kernel;
  return w;
}

void AddPooling(Table& t) {
  Add(t, {"max_pool2d_with_indices"}, [](const LoweringCall& c) -> Values {
    const PoolWindow w = PoolWindowOf(c);
    const LoweringOutput& values = c.outs().at(0);
    const LoweringOutput& indices = c.outs().at(1);
    auto [v, i] = MaxPool2dWithIndices(c.graph(), values.dtype, values.shape, indices.dtype, indices.shape,
                                       c.Value("self"), w.kernel, w.stride, w.padding, w.dilation, c.Bool("ceil_mode"));
    return {v, i};
  });
  Add(t, {"max_pool2d_with_indices_backward"}, Pointwise1([](const LoweringCall& c, ScalarType d, auto s) {
        const PoolWindow w = PoolWindowOf(c);
        return MaxPool2dWithIndicesBackward(c.graph(), d, std::move(s), c.Value("grad_output"), c.Value("self"),
                                            w.kernel, w.stride, w.padding, w.dilation, c.Value("indices"));
      }));
}

const Table& TheTable() {
  static const Table* table = [] {
    auto* t = new Table();
    AddElementFunctions(*t);  // first: the ops below replace their element function's lowering
    AddPointwiseOps(*t);
    AddViews(*t);
    AddReductions(*t);
    AddPooling(*t);
    return t;
  }();
  return *table;
}

bool IsComplexArg(const LoweringArg& a) {
  if (a.kind == LoweringArg::Kind::kValue) return IsComplex(a.value->dtype());
  return a.kind == LoweringArg::Kind::kNumber && a.number.is_complex();
}

}  // namespace

const LoweringFn* FindLowering(const Op& op) {
  const Table& t = TheTable();
  auto it = t.find(&op);
  return it == t.end() ? nullptr : &it->second;
}

std::vector<const Op*> LoweredOps() {
  std::vector<const Op*> ops;
  for (const auto& [op, fn] : TheTable()) ops.push_back(op);
  std::sort(ops.begin(), ops.end(), [](const Op* a, const Op* b) { return a->name() < b->name(); });
  return ops;
}

std::vector<ValuePtr> Lower(const LoweringCall& call) {
  const LoweringFn* fn = FindLowering(call.op());
  if (fn == nullptr) throw Fallback(StrCat("no lowering for ", call.op().name()));
  // the kernels know real numbers only: a complex value is computed by its eager kernel
  const bool complex = std::any_of(call.outs().begin(), call.outs().end(),
                                   [](const LoweringOutput& o) { return IsComplex(o.dtype); }) ||
                       std::any_of(call.args().begin(), call.args().end(), IsComplexArg);
  if (complex) throw Fallback("complex dtype");
  return (*fn)(call);
}

}  // namespace kiln::inductor::lowering
