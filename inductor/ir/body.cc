// inductor/ir/body.cc: tracing, placing and printing bodies (Note [Bodies] in body.h).
#include "inductor/ir/body.h"

#include <unordered_map>
#include <utility>

#include "runtime/error.h"

namespace kiln::inductor::ir {
namespace {

using codegen::Expr;
using codegen::ExprPtr;

// expr with Load(k) -> loads[k] and LoopIndex(v) -> AffineValue(at(v)); shared subtrees are
// rewritten once (an expression built by squaring reuses its operands).
class Rewriter {
 public:
  Rewriter(const std::vector<ExprPtr>& loads, const Placement& at) : loads_(loads), at_(at) {}

  ExprPtr operator()(const ExprPtr& e) {
    if (e->kind == Expr::Kind::kConst || e->kind == Expr::Kind::kAcc) return e;
    auto hit = done_.find(e.get());
    if (hit != done_.end()) return hit->second;
    ExprPtr out;
    if (e->kind == Expr::Kind::kLoad) {
      KILN_CHECK_VALUE(e->buffer >= 0 && static_cast<size_t>(e->buffer) < loads_.size(), "body: read ",
                       e->buffer, " of ", loads_.size());
      out = loads_[e->buffer];
    } else if (e->kind == Expr::Kind::kIndex) {
      out = AffineValue(at_(e->dim));
    } else {
      std::vector<ExprPtr> args;
      args.reserve(e->args.size());
      bool same = true;
      for (const ExprPtr& a : e->args) {
        args.push_back((*this)(a));
        same = same && args.back() == a;
      }
      out = same ? e : e->kind == Expr::Kind::kCast ? Expr::Cast(std::move(args[0]), e->dtype)
                                                     : Expr::Op(e->op, std::move(args));
    }
    done_.emplace(e.get(), out);
    return out;
  }

 private:
  const std::vector<ExprPtr>& loads_;
  const Placement& at_;
  std::unordered_map<const Expr*, ExprPtr> done_;
};

std::vector<Affine> Placed(const std::vector<Affine>& index, const Placement& at) {
  std::vector<Affine> out;
  out.reserve(index.size());
  for (const Affine& a : index) out.push_back(a.Compose(at));
  return out;
}

}  // namespace

Affine Placement::operator()(int v) const {
  if (v == kReduced) {
    KILN_CHECK_VALUE(has_reduced, "body: the reduced variable r read where no reduction loop is placed");
    return reduced;
  }
  KILN_CHECK_VALUE(v >= 0 && static_cast<size_t>(v) < dims.size(), "body: variable d", v, " of a placement of ",
                   dims.size(), " dimensions");
  return dims[v];
}

ExprPtr Tracer::Read(int64_t value, std::vector<Affine> index, int64_t as_of) {
  ir::Read read{value, std::move(index), as_of};
  size_t k = 0;
  while (k < reads_.size() && !(reads_[k] == read)) ++k;
  if (k == reads_.size()) reads_.push_back(std::move(read));
  return Expr::Load(static_cast<int>(k), codegen::Index{});
}

ExprPtr Tracer::Inline(const Body& body, const Placement& at, int64_t as_of) {
  std::vector<ExprPtr> loads;
  loads.reserve(body.reads.size());
  for (const ir::Read& r : body.reads) loads.push_back(Read(r.value, Placed(r.index, at), r.as_of >= 0 ? r.as_of : as_of));
  return Rewriter(loads, at)(body.expr);
}

Body Tracer::Finish(ExprPtr expr) {
  KILN_CHECK_VALUE(expr != nullptr, "Tracer.finish: no expression");
  Body b{std::move(expr), std::move(reads_)};
  reads_.clear();
  return b;
}

ExprPtr Instantiate(const Body& body, const Placement& at, Reader& reader, int64_t as_of) {
  std::vector<ExprPtr> loads;
  loads.reserve(body.reads.size());
  for (const ir::Read& r : body.reads)
    loads.push_back(reader.ReadValue(r.value, Placed(r.index, at), r.as_of >= 0 ? r.as_of : as_of));
  return Rewriter(loads, at)(body.expr);
}

ExprPtr AffineValue(const Affine& a) {
  ExprPtr e = Expr::ConstInt(a.offset(), codegen::DType::I64);
  for (const auto& [v, c] : a.terms()) {
    ExprPtr term = Expr::LoopIndex(v);
    if (c != 1) term = Expr::Op(codegen::OpCode::kMul, {term, Expr::ConstInt(c, codegen::DType::I64)});
    e = a.offset() == 0 && e->kind == Expr::Kind::kConst ? term : Expr::Op(codegen::OpCode::kAdd, {e, term});
  }
  return e;
}

codegen::Index KernelIndex(const Affine& offset, int n_outer) {
  codegen::Index ix;
  ix.offset = offset.offset();
  ix.outer_strides.assign(n_outer, 0);
  for (const auto& [v, c] : offset.terms()) {
    if (v == kReduced) {
      ix.inner_stride = c;
    } else {
      KILN_CHECK_VALUE(v >= 0 && v < n_outer, "KernelIndex: variable d", v, " of a kernel with ", n_outer,
                       " outer loops");
      ix.outer_strides[v] = c;
    }
  }
  return ix;
}

std::string Body::ToString() const {
  std::string s;
  for (size_t k = 0; k < reads.size(); ++k) {
    s += "read" + std::to_string(k) + " = v" + std::to_string(reads[k].value) + "[";
    for (size_t d = 0; d < reads[k].index.size(); ++d) s += (d ? ", " : "") + reads[k].index[d].ToString();
    s += "]";
    if (reads[k].as_of >= 0) s += " as of " + std::to_string(reads[k].as_of);
    s += "\n";
  }
  return s + codegen::SerializeExpr(*expr);
}

uint64_t Body::Hash() const {
  uint64_t h = codegen::ExprHash(*expr);
  for (const ir::Read& r : reads) {
    h = (h ^ static_cast<uint64_t>(r.value)) * 1099511628211ull;
    h = (h ^ static_cast<uint64_t>(r.as_of)) * 1099511628211ull;
    for (const Affine& a : r.index) h = (h ^ a.Hash()) * 1099511628211ull;
  }
  return h;
}

bool operator==(const Body& a, const Body& b) {
  return a.reads == b.reads && codegen::ExprEqual(*a.expr, *b.expr);
}

}  // namespace kiln::inductor::ir
