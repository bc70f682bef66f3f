// inductor/scheduler/probe.cc: placing a body to see what it reads (probe.h).
#include "inductor/scheduler/probe.h"

#include <algorithm>

#include "runtime/error.h"

namespace kiln::inductor::scheduler {
namespace {

using codegen::Expr;
using codegen::ExprPtr;
using ir::Affine;

std::vector<Affine> OwnIndices(size_t n) {
  std::vector<Affine> idx;
  for (size_t k = 0; k < n; ++k) idx.push_back(Affine::Var(static_cast<int>(k)));
  return idx;
}

class ProbeReader : public ir::Reader {
 public:
  ProbeReader(const Realization* state, ProbeResult& out) : state_(state), out_(out) {}

  ExprPtr ReadValue(int64_t handle, const std::vector<Affine>& index, int64_t as_of) override {
    std::shared_ptr<Value> value = ir::ValueOf(handle);
    KILN_CHECK_VALUE(value != nullptr, "probe: a body reads value ", handle, ", which no longer exists");
    if (value->kind() == Value::Kind::kReduction) {
      out_.reads_reduction = true;
      return Expr::Acc(0);
    }
    const Buffer* buf = nullptr;
    if (value->kind() == Value::Kind::kPointwise) {
      std::shared_ptr<Buffer> done = state_ ? state_->AsOf(as_of).Get(*value) : nullptr;
      if (!done) {
        const auto& pw = static_cast<const ir::Pointwise&>(*value);
        ir::Placement at{index, Affine(), false};
        return ir::Instantiate(pw.body(), at, *this, as_of);
      }
      buf = done.get();
    } else {
      buf = static_cast<const Buffer*>(value.get());
    }
    out_.loads.push_back(ir::ElementOffset(index, buf->stride()));
    const Buffer* root = &buf->Root();
    if (std::find(out_.buffers.begin(), out_.buffers.end(), root) == out_.buffers.end()) out_.buffers.push_back(root);
    return Expr::Load(0, codegen::Index{});
  }

 private:
  const Realization* state_;
  ProbeResult& out_;
};

}  // namespace

bool ProbeResult::Loads(const Buffer& b) const {
  return std::find(buffers.begin(), buffers.end(), &b.Root()) != buffers.end();
}

ProbeResult Probe(const Value& value, const Realization* state, const std::optional<std::vector<Affine>>& at) {
  ProbeResult out;
  ProbeReader reader(state, out);
  switch (value.kind()) {
    case Value::Kind::kReduction: {
      const auto& red = static_cast<const ir::Reduction&>(value);
      ir::Placement p{OwnIndices(red.kept().size()), Affine::Var(ir::kReduced), true};
      out.expr = ir::Instantiate(red.source(), p, reader);
      break;
    }
    case Value::Kind::kPointwise: {
      const auto& pw = static_cast<const ir::Pointwise&>(value);
      ir::Placement p{at ? *at : OwnIndices(pw.shape().size()), Affine(), false};
      out.expr = ir::Instantiate(pw.body(), p, reader);
      break;
    }
    case Value::Kind::kBuffer:
      KILN_CHECK_VALUE(false, "probe: a buffer has no body to place");
  }
  return out;
}

}  // namespace kiln::inductor::scheduler
