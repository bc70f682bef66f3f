// tensor/dispatcher.h: the op registry and the dispatcher.
//
// Each overload ("aten::add.Tensor") is an Op: its schema, tags and a dispatch table with one
// kernel slot per DispatchKey. An op is declared once, in tensor/ops/<family>.cc:
//
//   r.Def("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
//         {Tag::pointwise}, kFunctionAndMethod)
//       .Meta<&AddMeta>()           // sizes/strides/dtype over SymInt: Meta and Fake keys
//       .Impl<&AddCPU>(DispatchKey::CPU);
//
// Kernels are ordinary typed C++ functions; Impl<> wraps them into boxed kernels that take their
// arguments from a Stack (ivalue.h). A composite kernel (Composite<>) is built from other ops and
// fills every slot without a kernel of its own, so autograd, tracing and fake tensors all see
// the ops it decomposes into; CompositeExplicit<> (PyTorch's CompositeExplicitAutograd: factories,
// clone, split, the random ops) marks one that graph tracers record as one node all the same
// (fx/tracer.h, aot/functionalize.h). Calls go through Op::Call (boxed) or CallOp<Ret>(op, args...)
// (typed, in ops.h). See Note [Dispatch key order] in dispatch_key.h.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "tensor/ivalue.h"
#include "tensor/schema.h"

namespace kiln {

enum class Tag : uint32_t {
  pointwise = 1u << 0,
  reduction = 1u << 1,
  view = 1u << 2,
  inplace = 1u << 3,
  nondeterministic_seeded = 1u << 4,
  core = 1u << 5,
  data_dependent_output = 1u << 6,
  dynamic_output_shape = 1u << 7,
  inplace_view = 1u << 8,
  compute_intensive = 1u << 9,  // matmuls, convolutions, attention: never worth recomputing
};
const char* TagName(Tag t);
constexpr int kNumTags = 10;

// Note [Op cost classes]: what computing an op's result again costs, the question the compiler
// asks of every op (aot/partition.cc recomputes a value in the backward instead of saving it only
// when it is kFree or kMemoryBound; Inductor autotunes kComputeIntensive ops). Derived from the
// tags (view: kFree; pointwise, reduction: kMemoryBound; compute_intensive: kComputeIntensive),
// or declared where the tags do not say it (`.Cost(CostClass::kMemoryBound)` on a copy, a factory,
// cat, gather, softmax), so no compiler pass keeps a list of op names. Everything else is kOpaque:
// sorts, data-dependent shapes, factorizations, random draws.
enum class CostClass : uint8_t { kFree, kMemoryBound, kComputeIntensive, kOpaque };
const char* CostClassName(CostClass c);

// Whether an op is reachable as kiln.<name> (function), Tensor.<name> (method), or both; kModuleOnly:
// neither, only in the Python module its name's prefix names (an alias `special_expit` is
// kiln.special.expit alone, as native_functions.yaml's `python_module: special`).
enum Variants : uint8_t { kModuleOnly = 0, kFunction = 1, kMethod = 2, kFunctionAndMethod = 3 };

class Op;
using BoxedKernelFn = void (*)(const Op& op, DispatchKeySet keys, Stack& stack, void* ctx);

struct Kernel {
  BoxedKernelFn fn = nullptr;
  void* ctx = nullptr;  // e.g. a Python callable for kernels defined in Python
  explicit operator bool() const { return fn != nullptr; }
};

class Op {
 public:
  Op(const class Registry* registry, FunctionSchema schema, uint32_t tags, Variants variants);

  const FunctionSchema& schema() const { return schema_; }
  const std::string& name() const { return full_name_; }  // "aten::add.Tensor"
  const std::string& base_name() const { return base_name_; }  // "add"
  uint32_t tags() const { return tags_; }
  bool has_tag(Tag t) const { return tags_ & static_cast<uint32_t>(t); }
  CostClass cost_class() const { return cost_class_; }
  void set_cost_class(CostClass c) { cost_class_ = c; }
  // Note [Outer reduction kernels]: whether this op's CPU kernel reduces a dimension outer to the
  // kept ones by adding whole rows into a row of accumulators, vectorised along the kept
  // dimensions (Note [Outer sums] in ops/reduce.cc), for results of `dtype`. Inductor leaves such
  // a reduction to the kernel rather than generate a loop down strided columns, and asks here
  // instead of keeping a table of op names.
  bool has_outer_reduction_kernel(ScalarType dtype) const {
    return dtype != ScalarType::Undefined && (outer_reduction_dtypes_ >> static_cast<int>(dtype) & 1u);
  }
  void set_outer_reduction_dtypes(uint32_t mask) { outer_reduction_dtypes_ = mask; }
  Variants variants() const { return variants_; }
  const std::vector<int>& mutated_args() const { return mutated_args_; }
  // An out= overload ("out", "Scalar_out", a backward op's "grad_input"): its mutated arguments
  // are the results.
  bool is_out_overload() const;
  // Whether this op's backend kernels refuse overlapping writes (Note [Overlapping writes] in
  // dispatcher.cc): in-place ops that are not views and out= ops, unless exempted.
  bool checks_overlap() const { return checks_overlap_; }
  void allow_overlapping_writes() { checks_overlap_ = false; }

  // Boxed call: arguments on the stack (all of them, defaults filled) are replaced by results.
  void Call(Stack& stack) const { Redispatch(ComputeKeys(stack), stack); }
  // Call the kernel of the highest key in `keys` (for kernels that handle one layer).
  void Redispatch(DispatchKeySet keys, Stack& stack) const;
  DispatchKeySet ComputeKeys(const Stack& stack) const;

  bool HasKernel(DispatchKey k) const { return static_cast<bool>(kernels_[static_cast<int>(k)]); }
  bool HasComposite() const { return static_cast<bool>(composite_); }
  // A composite that graph tracers (make_fx, functionalization) record whole (CompositeExplicit<>).
  bool composite_explicit() const { return composite_explicit_; }
  void set_composite_explicit() { composite_explicit_ = true; }
  void SetKernel(DispatchKey k, Kernel kernel);
  void SetComposite(Kernel kernel);
  const Kernel& table_entry(DispatchKey k) const { return table_[static_cast<int>(k)]; }
  // What FakeKernel runs after checking and converting the arguments: the op's own Fake-slot
  // kernel (its meta function), else its composite kernel, else the Fake fallback (none: the op
  // has no meta function). See Note [The Fake dispatch key] in fake_tensor.h.
  const Kernel& fake_inner() const { return fake_inner_; }
  void RebuildTable();

  // Slots the later layers fill (autograd's derivative, aot's decomposition); opaque here.
  std::shared_ptr<void> autograd_info;
  std::shared_ptr<void> decomposition;

 private:
  const class Registry* registry_;
  FunctionSchema schema_;
  std::string full_name_, base_name_;
  uint32_t tags_;
  CostClass cost_class_;
  uint32_t outer_reduction_dtypes_ = 0;  // bit i: ScalarType i (Note [Outer reduction kernels])
  Variants variants_;
  std::vector<int> mutated_args_;
  void CheckOverlappingWrites(const Stack& stack) const;
  bool checks_overlap_ = false;
  std::array<Kernel, kNumDispatchKeys> kernels_{};
  Kernel composite_;
  bool composite_explicit_ = false;
  std::array<Kernel, kNumDispatchKeys> table_{};
  Kernel fake_inner_;
};

// Note [Op aliases]: PyTorch's second names of an op (arccos for acos, greater for gt, fix for trunc,
// special_expit for sigmoid) are declared where the op is, with Registry::Alias, and are the very
// op: kiln.arccos is kiln.acos (python/kiln/_aliases.py binds them from here), so autograd, fake
// tensors, graph capture and the version counter see the op they name. Where torch has an alias as
// a Tensor method only (`x.greater_(y)`, no torch.greater_), its variants say so.
struct OpAlias {
  std::string name;  // "arccos"
  Variants variants;
};

// All overloads of one name ("aten::add"), in registration order (the order Python tries them).
struct OpPacket {
  std::string qualified_name;  // "aten::add"
  std::string name;            // "add"
  std::vector<Op*> overloads;
  Variants variants = kFunction;
  std::vector<OpAlias> aliases;  // Note [Op aliases]
};

class OpDef;

class Registry {
 public:
  static Registry& Get();  // registers the built-in ops on first use
  OpDef Def(const std::string& schema, std::initializer_list<Tag> tags = {}, Variants variants = kFunction);
  // `alias` as a second name of the packet `name` (defined before): Note [Op aliases].
  void Alias(const std::string& alias, const std::string& name, Variants variants = kFunctionAndMethod);

  Op* Find(const std::string& full_name) const;  // "aten::add.Tensor"; "aten::add" = default overload
  const Op& FindOrThrow(const std::string& full_name) const;
  OpPacket* FindPacket(const std::string& qualified_name) const;
  const std::vector<std::unique_ptr<OpPacket>>& packets() const { return packets_; }
  std::vector<Op*> ops() const;

  // A layer-wide kernel for a key, used by ops with no kernel of their own there.
  void SetFallback(DispatchKey k, Kernel kernel);
  // Keys that pass calls down when an op has no kernel for them.
  void SetFallthrough(DispatchKey k, bool fallthrough);
  const Kernel& fallback(DispatchKey k) const { return fallbacks_[static_cast<int>(k)]; }
  bool is_fallthrough(DispatchKey k) const { return fallthrough_[static_cast<int>(k)]; }

 private:
  Registry();
  void RebuildAll();
  std::map<std::string, std::unique_ptr<Op>> ops_;
  std::map<std::string, OpPacket*> packet_index_;
  std::vector<std::unique_ptr<OpPacket>> packets_;
  std::array<Kernel, kNumDispatchKeys> fallbacks_{};
  std::array<bool, kNumDispatchKeys> fallthrough_{};
};

// Registers every built-in op family (tensor/ops/register.cc).
void RegisterBuiltinOps(Registry& r);

// ---------------------------------------------------------------------------------------------
// Typed <-> boxed conversion.

namespace boxing {

template <typename T, typename = void> struct Unbox;
#define KILN_UNBOX(T, EXPR) \
  template <> struct Unbox<T> { static T get(IValue& v) { return EXPR; } };
KILN_UNBOX(Tensor, v.to_tensor())
KILN_UNBOX(int64_t, v.to_int())
KILN_UNBOX(double, v.to_double())
KILN_UNBOX(bool, v.to_bool())
KILN_UNBOX(SymInt, v.to_symint())
KILN_UNBOX(Scalar, v.to_scalar())
KILN_UNBOX(std::string, v.to_string())
KILN_UNBOX(ScalarType, v.to_scalar_type())
KILN_UNBOX(Device, v.to_device())
KILN_UNBOX(Generator, v.to_generator())
KILN_UNBOX(Layout, v.to_layout())
KILN_UNBOX(MemoryFormat, v.to_memory_format())
KILN_UNBOX(std::vector<int64_t>, v.to_int_list())
KILN_UNBOX(std::vector<SymInt>, v.to_symint_list())
KILN_UNBOX(std::vector<double>, v.to_double_list())
KILN_UNBOX(std::vector<bool>, v.to_bool_list())
KILN_UNBOX(std::vector<Tensor>, v.to_tensor_list())
KILN_UNBOX(OptionalTensorList, v.to_optional_tensor_list())
#undef KILN_UNBOX
template <typename T> struct Unbox<std::optional<T>> {
  static std::optional<T> get(IValue& v) {
    if (v.is_none()) return std::nullopt;
    return Unbox<T>::get(v);
  }
};

template <typename T> struct Box {
  static void push(Stack& s, T&& v) { s.emplace_back(std::move(v)); }
};
template <typename... Ts> struct Box<std::tuple<Ts...>> {
  static void push(Stack& s, std::tuple<Ts...>&& t) {
    std::apply([&](auto&&... xs) { (s.emplace_back(std::move(xs)), ...); }, std::move(t));
  }
};

template <typename Ret> struct Pop {
  static Ret get(Stack& s) { return boxing::Unbox<Ret>::get(s.at(0)); }
};
template <typename... Ts> struct Pop<std::tuple<Ts...>> {
  template <size_t... I>
  static std::tuple<Ts...> get_impl(Stack& s, std::index_sequence<I...>) {
    return std::tuple<Ts...>(boxing::Unbox<Ts>::get(s.at(I))...);
  }
  static std::tuple<Ts...> get(Stack& s) { return get_impl(s, std::index_sequence_for<Ts...>{}); }
};
template <> struct Pop<void> { static void get(Stack&) {} };

// Note [Boxed kernels per signature]: a typed kernel is boxed by one function per signature,
// not per kernel: BoxedCall<R (*)(A...)>::Boxed unboxes the stack, calls the function Kernel's
// ctx points to, and boxes its results. A wrapper per kernel (the function a template argument,
// called directly) was the same code compiled 2,104 times (1,601 kernels, 503 meta functions)
// for 305 signatures: 0.75 MB of _C.so, and a fifth of the compile time of the op files with many
// ops of one signature (unary.cc 32 s -> 24 s, binary.cc 46 s -> 37 s). The call through a
// pointer costs the dispatcher nothing it can measure.
template <typename Sig> struct BoxedCall;
template <typename R, typename... A> struct BoxedCall<R (*)(A...)> {
  using Fn = R (*)(A...);
  static constexpr size_t kArity = sizeof...(A);
  template <size_t... I>
  static R CallUnboxed(Fn f, Stack& s, std::index_sequence<I...>) {
    return f(Unbox<std::decay_t<A>>::get(s[I])...);
  }
  static void Boxed(const Op& op, DispatchKeySet, Stack& s, void* fn) {
    KILN_INTERNAL_ASSERT(s.size() == kArity, op.name(), " got ", s.size(), " boxed arguments, its kernel takes ",
                         kArity);
    const Fn f = reinterpret_cast<Fn>(fn);
    if constexpr (std::is_void_v<R>) {
      CallUnboxed(f, s, std::make_index_sequence<kArity>{});
      s.clear();
    } else {
      R result = CallUnboxed(f, s, std::make_index_sequence<kArity>{});
      s.clear();
      Box<R>::push(s, std::move(result));
    }
  }
};

// The boxed kernel of a typed function F.
template <auto F>
Kernel WrapKernel() {
  return Kernel{&BoxedCall<decltype(F)>::Boxed, reinterpret_cast<void*>(F)};
}

}  // namespace boxing

// What a meta function computes for one output.
struct TensorMeta {
  SymDimVector sizes;
  SymDimVector strides;  // empty: contiguous
  ScalarType dtype = ScalarType::Float32;
  Device device;
};

// A tensor with the layout `m` describes: allocated on CPU, storage-less on meta.
Tensor EmptyFromMeta(const TensorMeta& m);

namespace boxing {
// Meta kernels from meta functions: TensorMeta results become storage-less meta tensors.
inline Tensor MetaToTensor(TensorMeta m) {
  m.device = Device(DeviceType::Meta);
  return EmptyFromMeta(m);
}
// An absent optional output (a backward op's output_mask[i] false) is an undefined tensor (None).
inline Tensor MetaToTensor(std::optional<TensorMeta> m) { return m ? MetaToTensor(std::move(*m)) : Tensor(); }
template <typename T> struct MetaResult { static T convert(T&& v) { return std::move(v); } };
template <> struct MetaResult<TensorMeta> {
  static Tensor convert(TensorMeta&& m) { return MetaToTensor(std::move(m)); }
};
template <typename... Ts> struct MetaResult<std::tuple<Ts...>> {
  static auto convert(std::tuple<Ts...>&& t) {
    return std::apply([](auto&&... m) { return std::make_tuple(MetaToTensor(std::move(m))...); }, std::move(t));
  }
};
// Meta kernels, boxed per signature as typed kernels are (Note [Boxed kernels per signature]).
template <typename Sig> struct BoxedMetaCall;
template <typename R, typename... A> struct BoxedMetaCall<R (*)(A...)> {
  using Fn = R (*)(A...);
  template <size_t... I>
  static auto CallUnboxed(Fn f, Stack& s, std::index_sequence<I...>) {
    return MetaResult<R>::convert(f(Unbox<std::decay_t<A>>::get(s[I])...));
  }
  static void Boxed(const Op&, DispatchKeySet, Stack& s, void* fn) {
    auto result = CallUnboxed(reinterpret_cast<Fn>(fn), s, std::make_index_sequence<sizeof...(A)>{});
    s.clear();
    Box<decltype(result)>::push(s, std::move(result));
  }
};
template <auto F>
Kernel WrapMeta() {
  return Kernel{&BoxedMetaCall<decltype(F)>::Boxed, reinterpret_cast<void*>(F)};
}
}  // namespace boxing

// Builder returned by Registry::Def.
class OpDef {
 public:
  explicit OpDef(Op* op) : op_(op) {}
  template <auto F> OpDef& Impl(DispatchKey k) {
    op_->SetKernel(k, boxing::WrapKernel<F>());
    return *this;
  }
  // A device-generic kernel on CPU and (where `cuda`) CUDA: it allocates through the meta function
  // and branches to its device's loop (the pointwise ops: CPU loops or a generated CUDA kernel).
  template <auto F> OpDef& CPUAndCUDA(bool cuda = true) {
    op_->SetKernel(DispatchKey::CPU, boxing::WrapKernel<F>());
    if (cuda) op_->SetKernel(DispatchKey::CUDA, boxing::WrapKernel<F>());
    return *this;
  }
  // The same function on every backend (views and other metadata-only ops).
  template <auto F> OpDef& AllBackends() {
    for (DispatchKey k : {DispatchKey::CPU, DispatchKey::CUDA, DispatchKey::Meta, DispatchKey::Fake})
      op_->SetKernel(k, boxing::WrapKernel<F>());
    return *this;
  }
  template <auto F> OpDef& Meta() {
    Kernel k = boxing::WrapMeta<F>();
    op_->SetKernel(DispatchKey::Meta, k);
    op_->SetKernel(DispatchKey::Fake, k);
    return *this;
  }
  // PyTorch writes this op's self even when it repeats an element or overlaps an input (fill_,
  // zero_, masked_fill_, index_put_, tril_, triu_, threshold_): skip the dispatcher's check.
  OpDef& AllowsOverlappingWrites() {
    op_->allow_overlapping_writes();
    return *this;
  }
  // The cost class where the tags do not imply it (Note [Op cost classes]).
  OpDef& Cost(CostClass c) {
    op_->set_cost_class(c);
    return *this;
  }
  // The result dtypes for which its CPU kernel reduces outer dimensions by whole rows (Note [Outer
  // reduction kernels]); none listed: every dtype.
  OpDef& OuterReductionKernel(std::initializer_list<ScalarType> dtypes = {}) {
    uint32_t mask = 0;
    for (ScalarType t : dtypes) mask |= 1u << static_cast<int>(t);
    op_->set_outer_reduction_dtypes(dtypes.size() ? mask : (1u << kNumScalarTypes) - 1);
    return *this;
  }
  template <auto F> OpDef& Composite() {
    op_->SetComposite(boxing::WrapKernel<F>());
    return *this;
  }
  // A composite that graph tracers record as one op, as PyTorch's CompositeExplicitAutograd
  // kernels appear in its traces (full, zeros_like, clone, _to_copy, split, rand, ...): make_fx
  // and functionalization give it their kernel directly instead of tracing what F calls.
  template <auto F> OpDef& CompositeExplicit() {
    Composite<F>();
    op_->set_composite_explicit();
    return *this;
  }
  Op* op() const { return op_; }

 private:
  Op* op_;
};

// Typed call through the dispatcher.
template <typename Ret, typename... Args>
Ret CallOp(const Op& op, Args&&... args) {
  Stack s;
  s.reserve(sizeof...(Args));
  (s.emplace_back(std::forward<Args>(args)), ...);
  op.Call(s);
  return boxing::Pop<Ret>::get(s);
}

// The Op for a full name, looked up once per call site.
#define KILN_OP(full_name)                                                             \
  ([]() -> const ::kiln::Op& {                                                         \
    static const ::kiln::Op& op = ::kiln::Registry::Get().FindOrThrow(full_name);      \
    return op;                                                                         \
  }())

}  // namespace kiln
