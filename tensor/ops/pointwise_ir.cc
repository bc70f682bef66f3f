// tensor/ops/pointwise_ir.cc: the Op* -> kernel IR builder table (Note [Pointwise ops as kernel IR]).
#include "tensor/ops/pointwise_ir.h"

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

}  // namespace kiln
