// inductor/ir/values.cc: values, their handles and groups, and their one-line printing (values.h).
#include "inductor/ir/values.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <unordered_map>

#include "runtime/error.h"

namespace kiln::inductor::ir {
namespace {

// handle -> live value. Values are made by the thread lowering a graph, but compiles may run in
// several threads at once.
struct Registry {
  std::mutex mu;
  std::unordered_map<int64_t, Value*> values;
};

Registry& TheRegistry() {
  static auto* r = new Registry;  // never destroyed: values may outlive static destruction
  return *r;
}

std::atomic<int64_t> g_next_handle{0};

std::string Ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

std::string Ops(const std::set<std::string>& ops) {
  std::string s = "[";
  for (const std::string& op : ops) s += (s.size() > 1 ? ", '" : "'") + op + "'";
  return s + "]";
}

}  // namespace

uint64_t LoopSpace::Hash() const {
  uint64_t h = 1469598103934665603ull;
  for (int64_t k : kept) h = (h ^ static_cast<uint64_t>(k)) * 1099511628211ull;
  h = (h ^ static_cast<uint64_t>(extent)) * 1099511628211ull;
  return (h ^ static_cast<uint64_t>(axis ? *axis + 1 : 0)) * 1099511628211ull;
}

std::string LoopSpace::ToString() const {
  return "LoopSpace(kept=" + Ints(kept) + ", extent=" + std::to_string(extent) +
         ", axis=" + (axis ? std::to_string(*axis) : "None") + ")";
}

Value::Value(Kind kind, ScalarType dtype, std::vector<int64_t> shape)
    : kind_(kind), handle_(g_next_handle++), dtype_(dtype), shape_(std::move(shape)) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.values.emplace(handle_, this);
}

Value::~Value() {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.values.erase(handle_);
}

int64_t Value::numel() const {
  int64_t n = 1;
  for (int64_t s : shape_) n *= s;
  return n;
}

std::shared_ptr<Value> ValueOf(int64_t handle) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.values.find(handle);
  if (it == r.values.end()) return nullptr;
  // weak_from_this: a value being destroyed (its count at 0, its destructor not yet run) is gone
  return std::static_pointer_cast<Value>(it->second->weak_from_this().lock());
}

std::vector<std::shared_ptr<Value>> Value::Group() const {
  std::vector<std::shared_ptr<Value>> out;
  if (group_)
    for (const auto& w : *group_)
      if (auto v = w.lock()) out.push_back(std::move(v));
  return out;
}

void Value::MakeGroup(const std::vector<std::shared_ptr<Value>>& values) {
  auto group = std::make_shared<std::vector<std::weak_ptr<Value>>>();
  for (const auto& v : values) {
    KILN_CHECK_VALUE(v != nullptr, "make_group: a value is None");
    group->push_back(v);
  }
  for (const auto& v : values) v->group_ = group;
}

std::set<Origin> Value::AllOrigins() const {
  std::set<Origin> out;
  std::vector<const Value*> todo{this};
  std::set<const Value*> seen;
  while (!todo.empty()) {
    const Value* v = todo.back();
    todo.pop_back();
    if (!seen.insert(v).second) continue;
    out.insert(v->origins.begin(), v->origins.end());
    if (const Traced* t = v->traced())
      for (const auto& inlined : t->inlined) todo.push_back(inlined.get());
  }
  return out;
}

Buffer::Buffer(std::optional<std::string> name_, ScalarType dtype, std::vector<int64_t> shape,
               std::vector<int64_t> stride, int64_t offset, Source source)
    : Value(Kind::kBuffer, dtype, std::move(shape)), name(std::move(name_)), stride_(std::move(stride)),
      offset_(offset), source_(source) {
  KILN_CHECK_VALUE(source != Source::kView, "Buffer: a view needs the buffer it views");
  KILN_CHECK_VALUE(stride_.size() == this->shape().size(), "Buffer: ", stride_.size(), " strides for ",
                   this->shape().size(), " dimensions");
}

Buffer::Buffer(std::optional<std::string> name_, ScalarType dtype, std::vector<int64_t> shape,
               std::vector<int64_t> stride, int64_t offset, std::shared_ptr<Buffer> base)
    : Value(Kind::kBuffer, dtype, std::move(shape)), name(std::move(name_)), stride_(std::move(stride)),
      offset_(offset), source_(Source::kView), base_(std::move(base)) {
  KILN_CHECK_VALUE(base_ != nullptr, "Buffer: a view of no buffer");
  KILN_CHECK_VALUE(stride_.size() == this->shape().size(), "Buffer: ", stride_.size(), " strides for ",
                   this->shape().size(), " dimensions");
}

const Buffer& Buffer::Root() const {
  const Buffer* b = this;
  while (b->base_) b = b->base_.get();
  return *b;
}

bool Buffer::IsContiguous() const { return stride_ == ContiguousStrides(shape()); }

std::string Buffer::ToString() const {
  return "Buffer " + name.value_or("None") + " " + ScalarTypeName(dtype()) + " " + Ints(shape()) +
         " stride=" + Ints(stride_);
}

Pointwise::Pointwise(ScalarType dtype, std::vector<int64_t> shape, std::shared_ptr<const Traced> traced)
    : Value(Kind::kPointwise, dtype, std::move(shape)), traced_(std::move(traced)) {
  KILN_CHECK_VALUE(traced_ && traced_->body, "Pointwise: no body");
}

std::string Pointwise::ToString() const {
  return std::string("Pointwise ") + ScalarTypeName(dtype()) + " " + Ints(shape()) + " ops=" + Ops(ops);
}

Reduction::Reduction(ScalarType dtype, std::vector<int64_t> kept, int64_t extent, std::string reduce,
                     std::shared_ptr<const Traced> source, std::vector<int64_t> keepdim_shape,
                     codegen::ExprPtr finish)
    : Value(Kind::kReduction, dtype, std::move(keepdim_shape)), kept_(std::move(kept)), extent_(extent),
      reduce_(std::move(reduce)), source_(std::move(source)), finish_(std::move(finish)) {
  KILN_CHECK_VALUE(source_ && source_->body, "Reduction: no source");
}

codegen::ExprPtr Reduction::Finished(codegen::ExprPtr acc) const {
  return finish_ ? codegen::SubstituteLoads(finish_, {std::move(acc)}) : acc;
}

std::string Reduction::ToString() const {
  return "Reduction " + reduce_ + " " + ScalarTypeName(dtype()) + " kept=" + Ints(kept_) +
         " extent=" + std::to_string(extent_) + " ops=" + Ops(ops);
}

codegen::DType KernelDType(ScalarType t) {
  switch (t) {
    case ScalarType::Float32: return codegen::DType::F32;
    case ScalarType::Float64: return codegen::DType::F64;
    case ScalarType::Int64: return codegen::DType::I64;
    case ScalarType::Int32: return codegen::DType::I32;
    case ScalarType::Bool: return codegen::DType::Bool;
    case ScalarType::BFloat16: return codegen::DType::BF16;
    default: break;
  }
  KILN_CHECK_NOT_IMPLEMENTED(false, "inductor: dtype kiln.", ScalarTypeName(t), " has no kernel type");
  return codegen::DType::F32;
}

ScalarType ScalarTypeOfKernel(codegen::DType t) {
  switch (t) {
    case codegen::DType::F32: return ScalarType::Float32;
    case codegen::DType::F64: return ScalarType::Float64;
    case codegen::DType::I64: return ScalarType::Int64;
    case codegen::DType::I32: return ScalarType::Int32;
    case codegen::DType::Bool: return ScalarType::Bool;
    case codegen::DType::BF16: return ScalarType::BFloat16;
    case codegen::DType::F16: return ScalarType::Float16;
    case codegen::DType::I16: return ScalarType::Int16;
    case codegen::DType::I8: return ScalarType::Int8;
    case codegen::DType::U8: return ScalarType::UInt8;
  }
  return ScalarType::Undefined;
}

std::vector<int64_t> ContiguousStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t running = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = running;
    running *= std::max<int64_t>(shape[d], 1);
  }
  return strides;
}

}  // namespace kiln::inductor::ir
