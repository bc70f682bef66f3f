// inductor/memory_plan/memory_plan.cc: buffer reuse, in-place writes and lifetimes over the
// wrapper's steps (memory_plan.h).
//
// Note [Memory plan]
// - A name dies after the last step that names it (inputs too: the wrapper cleared `args`), unless
//   it is an output or a static buffer. A buffer the wrapper allocated goes to a pool keyed by
//   (bytes spanned, dtype) instead, and an allocation of the same key takes the most recently
//   pooled one (`# reuse`), unless the new buffer is an output (returned memory must be its own).
// - Never pooled: a buffer that is the base of a view, or an input of an extern op whose results
//   may alias it (a fallback view: as_strided, a view op without a lowering). Its memory lives on
//   in the view. Such an input counts as read until the last read of any of those views (or their
//   views): pooled once its own name died, it was overwritten while the view was still to be read.
// - In place: an allocation whose next kernel is one loop of one store into it may take the
//   memory of an input of that kernel instead (`# in place`) when the input is owned by the
//   wrapper, not static, dies in that kernel, no view of it is read there or later, it spans the
//   same bytes with the same dtype, and every load of it reads the element being stored (each
//   element is read before its own store, and no other element is read). A view read by the
//   kernel itself counts: `v.diagonal() - v` read the extern diagonal of v while storing over v
//   (fuzz seed 171, program 27596). The kernel then reads the input through the output's pointer
//   (the wrapper rewrites its IR before compiling: with two pointers to one array, LLVM's
//   vectoriser guarded the vector loop with an overlap check that always failed). The victim is
//   never pooled afterwards: its memory is the new buffer's.
// - Static (reduce-overhead): the allocations no output can see (not returned, not the base of a
//   returned view, not an input of an aliasing extern) are made by the first call and kept.
#include "inductor/memory_plan/memory_plan.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "runtime/error.h"

namespace kiln::inductor {
namespace {

bool SameIndex(const codegen::Index& a, const codegen::Index& b) {
  return a.offset == b.offset && a.outer_strides == b.outer_strides && a.inner_stride == b.inner_stride;
}

}  // namespace

StoreAccess AnalyzeStoreAccess(const codegen::Kernel& k) {
  StoreAccess access;
  if (k.loops.size() != 1 || k.loops[0].stmts.size() != 1) return access;
  const codegen::Stmt& st = k.loops[0].stmts[0];
  if (st.kind != codegen::Stmt::Kind::kStore) return access;
  access.store = st.buffer;
  // per buffer: 0 never loaded, 1 every load at the stored element, 2 some load elsewhere
  std::vector<int> loads(k.buffers.size(), 0);
  codegen::ForEachExpr(*st.expr, [&](const codegen::Expr& e) {
    if (e.kind != codegen::Expr::Kind::kLoad || e.buffer < 0 || e.buffer >= static_cast<int>(loads.size())) return;
    loads[e.buffer] = (SameIndex(e.index, st.index) && loads[e.buffer] != 2) ? 1 : 2;
  });
  for (size_t p = 0; p < loads.size(); ++p)
    if (loads[p] == 1) access.read_at_store.push_back(static_cast<int>(p));
  return access;
}

codegen::Kernel ReadThroughStore(const codegen::Kernel& k, int victim, int store) {
  const int n = static_cast<int>(k.buffers.size());
  if (victim < 0 || victim >= n || store < 0 || store >= n || victim == store)
    throw ValueError(StrCat("[inductor.memory_plan] kernel '", k.name, "': cannot read buffer ", victim,
                            " through buffer ", store, " (", n, " buffers)"));
  codegen::Validate(k);  // every load's buffer in range before `position` is indexed by it
  std::vector<int> position(n);
  for (int i = 0; i < n; ++i) {
    int p = i == victim ? store : i;
    position[i] = p > victim ? p - 1 : p;
  }
  codegen::Kernel out;
  out.name = k.name;
  out.outer = k.outer;
  for (int i = 0; i < n; ++i)
    if (i != victim) out.buffers.push_back(k.buffers[i]);
  for (const codegen::Loop& loop : k.loops) {
    codegen::Loop l{loop.extent, {}};
    for (codegen::Stmt st : loop.stmts) {
      if (st.kind == codegen::Stmt::Kind::kStore) st.buffer = position[st.buffer];
      st.expr = codegen::MapLoads(st.expr, [&](const codegen::ExprPtr& load) {
        return codegen::Expr::Load(position[load->buffer], load->index);
      });
      l.stmts.push_back(std::move(st));
    }
    out.loops.push_back(std::move(l));
  }
  return out;
}

int64_t SpanBytes(const std::vector<int64_t>& shape, const std::vector<int64_t>& stride, int64_t itemsize) {
  if (shape.size() != stride.size())
    throw ValueError(StrCat("[inductor.memory_plan] a layout needs one stride per dimension: got ", shape.size(),
                            " sizes and ", stride.size(), " strides"));
  int64_t last = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return 0;
    last += (shape[d] - 1) * std::llabs(stride[d]);
  }
  return (last + 1) * itemsize;
}

const char* AllocKindName(AllocPlan::Kind k) {
  switch (k) {
    case AllocPlan::Kind::kFresh: return "fresh";
    case AllocPlan::Kind::kReuse: return "reuse";
    case AllocPlan::Kind::kInPlace: return "in place";
    case AllocPlan::Kind::kStatic: return "static";
  }
  return "?";
}

int MemoryPlanner::Id(const std::string& name) {
  auto [it, added] = ids_.emplace(name, static_cast<int>(names_.size()));
  if (added) names_.push_back(name);
  return it->second;
}

void MemoryPlanner::Declare(const std::string& name, int64_t nbytes, const std::string& dtype) {
  if (nbytes < 0) throw ValueError(StrCat("[inductor.memory_plan] buffer ", name, " spans ", nbytes, " bytes"));
  owned_[Id(name)] = Owned{nbytes, dtype};
}

void MemoryPlanner::Alloc(const std::string& name) { steps_.push_back(Step{Kind::kAlloc, {Id(name)}}); }

void MemoryPlanner::Kernel(const std::vector<std::string>& buffers, StoreAccess access) {
  Step s{Kind::kKernel};
  for (const std::string& b : buffers) s.names.push_back(Id(b));
  const int n = static_cast<int>(buffers.size());
  if (access.store >= n) throw ValueError(StrCat("[inductor.memory_plan] a kernel of ", n, " buffers stores into buffer ", access.store));
  for (int p : access.read_at_store)
    if (p < 0 || p >= n) throw ValueError(StrCat("[inductor.memory_plan] a kernel of ", n, " buffers reads buffer ", p));
  s.access = std::move(access);
  steps_.push_back(std::move(s));
}

void MemoryPlanner::View(const std::string& view, const std::string& base) {
  steps_.push_back(Step{Kind::kView, {Id(view), Id(base)}});
}

void MemoryPlanner::Extern(const std::vector<std::string>& inputs, const std::vector<std::string>& results, bool fresh) {
  Step s{Kind::kExtern};
  for (const std::string& b : inputs) s.names.push_back(Id(b));
  for (const std::string& b : results) s.names.push_back(Id(b));
  s.results = static_cast<int>(results.size());
  s.fresh = fresh;
  steps_.push_back(std::move(s));
}

void MemoryPlanner::Return(const std::vector<std::string>& outputs) {
  Step s{Kind::kReturn};
  for (const std::string& b : outputs) s.names.push_back(Id(b));
  steps_.push_back(std::move(s));
}

const MemoryPlanner::Owned* MemoryPlanner::OwnedBy(int id) const {
  auto it = owned_.find(id);
  return it == owned_.end() ? nullptr : &it->second;
}

// The input of the next kernel after `alloc_step` that `buffer` may overwrite (Note [Memory
// plan]), or -1; fills plan's in-place fields when found.
int MemoryPlanner::InPlaceVictim(int alloc_step, int buffer, const std::vector<int>& last_use,
                                 const std::vector<bool>& overwritable, const std::vector<int>& view_last,
                                 AllocPlan* plan) const {
  int j = alloc_step + 1;
  while (j < static_cast<int>(steps_.size()) && steps_[j].kind != Kind::kKernel) ++j;
  if (j == static_cast<int>(steps_.size())) return -1;
  const Step& kernel = steps_[j];
  const int store = kernel.access.store;
  if (store < 0 || kernel.names[store] != buffer) return -1;
  const Owned* out = OwnedBy(buffer);
  for (int pos : kernel.access.read_at_store) {
    const int b = kernel.names[pos];
    if (b == buffer || !overwritable[b] || last_use[b] != j || view_last[b] >= j) continue;
    const Owned* in = OwnedBy(b);
    if (in->nbytes != out->nbytes || in->dtype != out->dtype) continue;
    plan->kind = AllocPlan::Kind::kInPlace;
    plan->source = names_[b];
    plan->kernel_step = j;
    plan->victim = pos;
    plan->store = store;
    return b;
  }
  return -1;
}

MemoryPlan MemoryPlanner::Plan() const {
  const int n = static_cast<int>(names_.size());
  const int steps = static_cast<int>(steps_.size());
  std::vector<int> last_use(n, -1);
  std::vector<bool> output(n, false), is_static(n, false), aliased(n, false), overwritable(n, false);
  for (int i = 0; i < steps; ++i)
    for (int id : steps_[i].names) last_use[id] = i;
  for (const Step& s : steps_)
    if (s.kind == Kind::kReturn)
      for (int id : s.names) output[id] = true;

  // owned: allocated, or an extern's fresh result
  auto require_declared = [&](int id) {
    if (!OwnedBy(id))
      throw ValueError(StrCat("[inductor.memory_plan] buffer ", names_[id], " is allocated but was never declared"));
  };
  for (const Step& s : steps_) {
    if (s.kind == Kind::kAlloc) {
      require_declared(s.names[0]);
      overwritable[s.names[0]] = true;
    } else if (s.kind == Kind::kExtern && s.fresh) {
      for (size_t k = s.names.size() - s.results; k < s.names.size(); ++k) {
        require_declared(s.names[k]);
        overwritable[s.names[k]] = true;
      }
    }
  }

  MemoryPlan plan;
  plan.steps.resize(steps);
  if (static_memory_) {  // reduce-overhead: what no output can see
    std::vector<bool> escaping = output;
    for (int i = steps - 1; i >= 0; --i) {  // views and aliasing externs pass escape on to their bases
      const Step& s = steps_[i];
      if (s.kind == Kind::kView && escaping[s.names[0]]) escaping[s.names[1]] = true;
      if (s.kind == Kind::kExtern && !s.fresh)
        for (int id : s.names) escaping[id] = true;
    }
    for (const Step& s : steps_)
      if (s.kind == Kind::kAlloc && !escaping[s.names[0]] && !is_static[s.names[0]]) {
        is_static[s.names[0]] = true;
        overwritable[s.names[0]] = false;
        plan.static_buffers.push_back(names_[s.names[0]]);
      }
  }

  // view bases and aliasing externs' inputs: never pooled, read until their views' last reads
  std::vector<int> view_last(n, -1);
  for (int i = steps - 1; i >= 0; --i) {  // later views first, so chains of views add up
    const Step& s = steps_[i];
    std::vector<int> views, bases;
    if (s.kind == Kind::kView) {
      views = {s.names[0]};
      bases = {s.names[1]};
      aliased[s.names[1]] = true;
    } else if (s.kind == Kind::kExtern && !s.fresh) {
      views.assign(s.names.end() - s.results, s.names.end());
      for (auto it = s.names.begin(); it != s.names.end() - s.results; ++it)
        if (std::find(views.begin(), views.end(), *it) == views.end() &&
            std::find(bases.begin(), bases.end(), *it) == bases.end())
          bases.push_back(*it);
      for (int b : bases) aliased[b] = true;
    } else {
      continue;
    }
    int end = -1;
    for (int v : views) end = std::max({end, last_use[v], view_last[v]});
    for (int b : bases) view_last[b] = std::max(view_last[b], end);
  }

  std::map<std::pair<int64_t, std::string>, std::vector<int>> pool;
  std::vector<bool> pooled_kind(n, false);  // allocated by the wrapper (not static): pooled at death
  std::vector<std::vector<int>> dropped(steps);  // per kernel step: inputs it now reads through its output
  for (int i = 0; i < steps; ++i) {
    const Step& s = steps_[i];
    StepPlan& out = plan.steps[i];
    if (s.kind == Kind::kAlloc) {
      const int b = s.names[0];
      if (is_static[b]) {
        out.alloc.kind = AllocPlan::Kind::kStatic;
      } else {
        const Owned* own = OwnedBy(b);
        int victim = output[b] ? -1 : InPlaceVictim(i, b, last_use, overwritable, view_last, &out.alloc);
        auto reuse = pool.find({own->nbytes, own->dtype});
        if (victim >= 0) {
          aliased[victim] = true;  // its memory is b's now: never pooled
          dropped[out.alloc.kernel_step].push_back(victim);
        } else if (reuse != pool.end() && !reuse->second.empty() && !output[b]) {
          out.alloc.kind = AllocPlan::Kind::kReuse;
          out.alloc.source = names_[reuse->second.back()];
          reuse->second.pop_back();
        }
        pooled_kind[b] = true;
      }
    }
    std::unordered_set<int> seen;  // once each: `clamp(x, lo, x)` names x twice
    for (int id : s.names) {
      if (!seen.insert(id).second) continue;
      if (std::find(dropped[i].begin(), dropped[i].end(), id) != dropped[i].end()) continue;  // gone already
      if (last_use[id] != i || output[id] || s.kind == Kind::kReturn || is_static[id]) continue;
      if (pooled_kind[id] && !aliased[id]) {
        const Owned* own = OwnedBy(id);
        pool[{own->nbytes, own->dtype}].push_back(id);
      } else {
        out.dies.push_back(names_[id]);
      }
    }
  }
  return plan;
}

std::string MemoryPlanner::StepsToString() const {
  std::ostringstream os;
  auto list = [&](auto begin, auto end) {
    for (auto it = begin; it != end; ++it) os << ' ' << names_[*it];
  };
  for (const Step& s : steps_) {
    switch (s.kind) {
      case Kind::kAlloc: {
        const Owned* own = OwnedBy(s.names[0]);
        os << "alloc " << names_[s.names[0]];
        if (own) os << ' ' << own->nbytes << ' ' << own->dtype;
        break;
      }
      case Kind::kKernel:
        os << "kernel";
        list(s.names.begin(), s.names.end());
        if (s.access.store >= 0) {
          os << " store=" << s.access.store << " at_store=";
          for (size_t k = 0; k < s.access.read_at_store.size(); ++k) os << (k ? "," : "") << s.access.read_at_store[k];
        }
        break;
      case Kind::kView: os << "view " << names_[s.names[0]] << ' ' << names_[s.names[1]]; break;
      case Kind::kExtern:
        os << (s.fresh ? "extern" : "extern_alias");
        list(s.names.begin(), s.names.end() - s.results);
        os << " ->";
        list(s.names.end() - s.results, s.names.end());
        break;
      case Kind::kReturn:
        os << "return";
        list(s.names.begin(), s.names.end());
        break;
    }
    os << '\n';
  }
  return os.str();
}

std::string MemoryPlan::ToString() const {
  std::ostringstream os;
  if (!static_buffers.empty()) {
    os << "static:";
    for (const std::string& b : static_buffers) os << ' ' << b;
    os << '\n';
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepPlan& s = steps[i];
    std::ostringstream line;
    if (s.alloc.kind != AllocPlan::Kind::kFresh) {
      line << AllocKindName(s.alloc.kind);
      if (!s.alloc.source.empty()) line << ' ' << s.alloc.source;
      if (s.alloc.kind == AllocPlan::Kind::kInPlace)
        line << " (step " << s.alloc.kernel_step << ": buffer " << s.alloc.victim << " -> " << s.alloc.store << ")";
    }
    if (!s.dies.empty()) {
      if (!line.str().empty()) line << "; ";
      line << "del";
      for (const std::string& d : s.dies) line << ' ' << d;
    }
    if (!line.str().empty()) os << i << ": " << line.str() << '\n';
  }
  return os.str();
}

}  // namespace kiln::inductor
