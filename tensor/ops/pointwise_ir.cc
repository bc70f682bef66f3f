// tensor/ops/pointwise_ir.cc: the Op* -> kernel IR builder table (Note [Pointwise ops as kernel IR]).
#include "tensor/ops/pointwise_ir.h"

#include <optional>
#include <unordered_map>

#include "runtime/error.h"

namespace kiln {
namespace {

struct Table {
  std::unordered_map<const Op*, PointwiseIr> by_op;
  std::vector<const Op*> order;
};
Table& GetTable() {
  static Table* t = new Table();
  return *t;
}

}  // namespace

// Filled while the registry registers its ops (once, under Registry::Get's static initialisation),
// read-only afterwards.
void RegisterPointwiseIr(const Op& op, PointwiseIr ir) {
  Table& t = GetTable();
  KILN_INTERNAL_ASSERT(!t.by_op.count(&op), "pointwise IR registered twice for ", op.name());
  t.by_op.emplace(&op, std::move(ir));
  t.order.push_back(&op);
}

const PointwiseIr* FindPointwiseIr(const Op& op) {
  const Table& t = GetTable();
  auto it = t.by_op.find(&op);
  return it == t.by_op.end() ? nullptr : &it->second;
}

std::vector<const Op*> OpsWithPointwiseIr() { return GetTable().order; }

namespace {

// Whether ir's element function is one operator over its operands in order: that operator.
std::optional<codegen::OpCode> SingleOperator(const Op& op, const PointwiseIr& ir) {
  if (!ir.build || ir.num_params != 0) return std::nullopt;
  const std::vector<Argument>& args = op.schema().arguments;
  if (static_cast<int>(args.size()) < ir.arity) return std::nullopt;
  for (int i = 0; i < ir.arity; ++i)
    if (args[i].kind != TypeKind::Tensor || args[i].optional) return std::nullopt;
  std::vector<codegen::ExprPtr> operands;
  for (int i = 0; i < ir.arity; ++i) operands.push_back(codegen::Expr::Load(i, codegen::Index{}));
  const ScalarType compute = ir.compute(std::vector<ScalarType>(ir.arity, ScalarType::Float32));
  codegen::ExprPtr e = ir.build(std::move(operands), compute, DeviceType::CPU);
  if (e->kind != codegen::Expr::Kind::kOp || static_cast<int>(e->args.size()) != ir.arity) return std::nullopt;
  for (int i = 0; i < ir.arity; ++i)
    if (e->args[i]->kind != codegen::Expr::Kind::kLoad || e->args[i]->buffer != i) return std::nullopt;
  return e->op;
}

}  // namespace

const Op* CoreOpOf(codegen::OpCode op) {
  static const auto* core = [] {
    auto* table = new std::unordered_map<int, const Op*>();
    for (const Op* candidate : OpsWithPointwiseIr()) {
      if (!candidate->has_tag(Tag::core)) continue;
      std::optional<codegen::OpCode> computes = SingleOperator(*candidate, *FindPointwiseIr(*candidate));
      if (computes) table->emplace(static_cast<int>(*computes), candidate);  // the first one stays
    }
    table->emplace(static_cast<int>(codegen::OpCode::kWhere), &Registry::Get().FindOrThrow("aten::where.self"));
    return table;
  }();
  auto it = core->find(static_cast<int>(op));
  return it == core->end() ? nullptr : it->second;
}

}  // namespace kiln
