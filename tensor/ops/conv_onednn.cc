// tensor/ops/conv_onednn.cc: float32 convolutions through oneDNN (conv_onednn.h).
//
// Note [oneDNN convolutions]: oneDNN's fast CPU convolutions (brgconv, AVX-512 or AVX2) read and
// write activations channels-last (nhwc) and want their weights in a blocked layout of their own;
// given nchw activations they fall back to an im2col GEMM no faster than kiln's, and given plain
// weights with nhwc activations to a reference loop a thousand times slower. So every call runs
// the convolution in nhwc with the weights reordered to the layout the primitive chose, and
// reorders the user's tensors in and out where their strides differ (a channels-last model
// reorders nothing but its weights, an nchw one also its activations; each reorder is one cheap
// pass). Weights are reordered on every call, as PyTorch's eager convolution does: a cache keyed
// by address would go stale when a buffer is freed and reused.
//
// The weight reorder is a pass over the weights on every call; when each weight is used at few
// output positions (N * oh * ow: resnet18's last stage at batch 16 and 64x64 has 64) it costs more
// than oneDNN saves, and kiln's im2col GEMM runs instead (512 -> 512 channels on 2x2: oneDNN 2.6
// ms with its 1.2 ms reorder, im2col 1.7 ms; 256 -> 256 on 4x4: 1.25 against 1.45 ms; one thread,
// AVX-512).
//
// Primitive descriptors are built once per shape, strides and parameters (a few hundred
// microseconds each, oneDNN's JIT included) and kept in a bounded map; a shape for which oneDNN
// offers only its reference kernel is remembered as such and runs kiln's own kernel. Scratchpads
// are the caller's (scratchpad_mode user), so two threads may run one primitive at once. A
// primitive keeps the OpenMP thread count it was made under, so kiln's count is set before a plan
// is made and is part of its key (made under OpenMP's default of every core, kiln.set_num_threads(1)
// ran convolutions on two threads here, doubling their CPU time).
#include "tensor/ops/conv_onednn.h"

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "runtime/onednn/onednn.h"

namespace kiln {

static std::atomic<int64_t> g_calls{0};

int64_t OneDnnConvolutionCalls() { return g_calls.load(std::memory_order_relaxed); }

#if KILN_HAVE_ONEDNN
namespace {

using onednn::Api;
using onednn::Check;

// One memory descriptor, initialised by format tag or by the strides of a tensor.
struct Md {
  dnnl_memory_desc_t md{};
};

Md ByTag(const Api& api, const std::vector<int64_t>& dims, dnnl_format_tag_t tag) {
  Md m;
  Check(api.dnnl_memory_desc_init_by_tag(&m.md, static_cast<int>(dims.size()), dims.data(), dnnl_f32, tag),
        "dnnl_memory_desc_init_by_tag");
  return m;
}

Md ByStrides(const Api& api, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  Md m;
  Check(api.dnnl_memory_desc_init_by_strides(&m.md, static_cast<int>(dims.size()), dims.data(), dnnl_f32,
                                             strides.data()),
        "dnnl_memory_desc_init_by_strides");
  return m;
}

// A tensor as oneDNN sees it: 4-D [N, C, H, W] activations (a 1-D convolution's [N, C, L] with
// H = 1) or weights [O, C/g, kh, kw], 5-D [g, O/g, C/g, kh, kw] with groups.
struct View {
  std::vector<int64_t> dims, strides;
};

View Activation(const Tensor& t) {
  View v;
  for (int64_t d = 0; d < t.dim(); ++d) v.dims.push_back(t.size(d)), v.strides.push_back(t.stride(d));
  if (t.dim() == 3) {  // [N, C, L] -> [N, C, 1, L], H's stride as a contiguous tensor's
    v.dims.insert(v.dims.begin() + 2, 1);
    v.strides.insert(v.strides.begin() + 2, v.strides[2] * v.dims[3]);
  }
  return v;
}

View Weights(const Tensor& w, int64_t groups) {
  View v = Activation(w);
  if (groups > 1) {
    v.dims[0] /= groups;
    v.dims.insert(v.dims.begin(), groups);
    v.strides.insert(v.strides.begin(), v.strides[0] * v.dims[1]);
  }
  return v;
}

// Whether oneDNN can address a tensor in place: a dense layout (contiguous or channels-last) or
// any strides without zeros (an expanded tensor is copied first by the caller).
bool Addressable(const Tensor& t) {
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) == 0 && t.size(d) > 1) return false;
  return true;
}

// Owned oneDNN handles.
struct PrimitiveDesc {
  const Api* api = nullptr;
  dnnl_primitive_desc_t pd = nullptr;
  dnnl_primitive_t prim = nullptr;
  size_t scratch = 0;
  PrimitiveDesc() = default;
  PrimitiveDesc(const PrimitiveDesc&) = delete;
  PrimitiveDesc& operator=(const PrimitiveDesc&) = delete;
  ~PrimitiveDesc() {
    if (prim != nullptr) api->dnnl_primitive_destroy(prim);
    if (pd != nullptr) api->dnnl_primitive_desc_destroy(pd);
  }
  const dnnl_memory_desc_t* Query(dnnl_query_t what) const { return api->dnnl_primitive_desc_query_md(pd, what, 0); }
  // False when oneDNN chose its reference implementation ("ref:any"): far slower than kiln's.
  bool Optimized() const {
    const char* impl = nullptr;
    api->dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    return impl != nullptr && std::strncmp(impl, "ref", 3) != 0;
  }
};

struct Attr {
  const Api& api;
  dnnl_primitive_attr_t attr = nullptr;
  explicit Attr(const Api& a) : api(a) {
    Check(api.dnnl_primitive_attr_create(&attr), "dnnl_primitive_attr_create");
    Check(api.dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user),
          "dnnl_primitive_attr_set_scratchpad_mode");
  }
  ~Attr() { api.dnnl_primitive_attr_destroy(attr); }
};

// Builds pd's primitive and records its scratchpad size; false if creating the descriptor failed
// (oneDNN has no implementation for it).
bool Finish(const Api& api, std::unique_ptr<PrimitiveDesc>& p, dnnl_status_t created) {
  if (created != dnnl_success) return false;
  p->scratch = api.dnnl_memory_desc_get_size(p->Query(dnnl_query_scratchpad_md));
  Check(api.dnnl_primitive_create(&p->prim, p->pd), "dnnl_primitive_create");
  return true;
}

std::unique_ptr<PrimitiveDesc> MakeReorder(const Api& api, const dnnl_memory_desc_t& from,
                                           const dnnl_memory_desc_t& to) {
  if (api.dnnl_memory_desc_equal(&from, &to)) return nullptr;  // same layout: no pass
  auto r = std::make_unique<PrimitiveDesc>();
  r->api = &api;
  Attr attr(api);
  Check(api.dnnl_reorder_primitive_desc_create(&r->pd, &from, api.engine, &to, api.engine, attr.attr),
        "dnnl_reorder_primitive_desc_create");
  r->scratch = api.dnnl_memory_desc_get_size(r->Query(dnnl_query_scratchpad_md));
  Check(api.dnnl_primitive_create(&r->prim, r->pd), "dnnl_primitive_create (reorder)");
  return r;
}

// The convolution's parameters as oneDNN takes them (dilation counts the gaps: d - 1).
struct ConvDims {
  std::vector<int64_t> strides, dilates, pad_l, pad_r;
};

ConvDims MakeConvDims(const ConvParams& p) {
  ConvDims c;
  if (p.dims == 1) {
    c.strides = {1, p.stride[0]}, c.dilates = {0, p.dilation[0] - 1}, c.pad_l = {0, p.padding[0]};
  } else {
    c.strides = p.stride, c.pad_l = p.padding;
    c.dilates = {p.dilation[0] - 1, p.dilation[1] - 1};
  }
  c.pad_r = c.pad_l;  // with PyTorch's floor, symmetric padding gives its output size
  return c;
}

// The cache key: kind (forward with or without bias, backward and which gradients), parameters,
// and the dims and strides of every user tensor (null: a gradient not asked for).
using Key = std::vector<int64_t>;

void Append(Key& key, const View& v) {
  key.push_back(static_cast<int64_t>(v.dims.size()));
  key.insert(key.end(), v.dims.begin(), v.dims.end());
  key.insert(key.end(), v.strides.begin(), v.strides.end());
}

Key MakeKey(int64_t kind, int omp_threads, const ConvParams& p, std::initializer_list<const View*> views) {
  // oneDNN fixes a primitive's thread count when it is created: plans are per thread count
  Key key = {kind, omp_threads, p.dims, p.groups};
  for (const auto* list : {&p.stride, &p.padding, &p.dilation}) key.insert(key.end(), list->begin(), list->end());
  for (const View* v : views) v != nullptr ? Append(key, *v) : key.push_back(-1);
  return key;
}

// Cached plans by key; null plans (oneDNN has only its reference kernel) are cached too. Bounded:
// when full it is cleared (plans in use are shared_ptrs and outlive it).
template <typename Plan>
class PlanCache {
 public:
  template <typename Make>
  std::shared_ptr<const Plan> Get(const Key& key, Make make) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = plans_.find(key);
      if (it != plans_.end()) return it->second;
    }
    std::shared_ptr<const Plan> plan = make();  // built outside the lock: oneDNN's JIT takes time
    std::lock_guard<std::mutex> lock(mu_);
    if (plans_.size() >= kCapacity) plans_.clear();
    plans_.emplace(key, plan);
    return plan;
  }

 private:
  static constexpr size_t kCapacity = 512;
  std::mutex mu_;
  std::map<Key, std::shared_ptr<const Plan>> plans_;
};

// A memory object over a buffer for the duration of one call.
struct Memory {
  const Api& api;
  dnnl_memory_t mem = nullptr;
  Memory(const Api& a, const dnnl_memory_desc_t& md, void* data) : api(a) {
    Check(api.dnnl_memory_create(&mem, &md, api.engine, data), "dnnl_memory_create");
  }
  ~Memory() { api.dnnl_memory_destroy(mem); }
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;
};

// A float buffer of at least `bytes` bytes from kiln's CPU allocator (null when bytes is 0).
struct Buffer {
  std::unique_ptr<Scratch<float>> scratch;
  explicit Buffer(size_t bytes) {
    if (bytes > 0) scratch = std::make_unique<Scratch<float>>(static_cast<int64_t>((bytes + 3) / 4));
  }
  void* data() const { return scratch ? scratch->data() : nullptr; }
};

// Runs a primitive on this thread's stream with its arguments plus a scratchpad of its own.
void Execute(const Api& api, const PrimitiveDesc& p, std::vector<dnnl_exec_arg_t> args, const char* what) {
  Buffer scratch(p.scratch);
  std::unique_ptr<Memory> scratch_mem;
  if (p.scratch > 0) {
    scratch_mem = std::make_unique<Memory>(api, *p.Query(dnnl_query_scratchpad_md), scratch.data());
    args.push_back({DNNL_ARG_SCRATCHPAD, scratch_mem->mem});
  }
  dnnl_stream_t stream = onednn::ThisThreadStream(api);
  Check(api.dnnl_primitive_execute(p.prim, stream, static_cast<int>(args.size()), args.data()), what);
}

// Copies `from` (layout `from_md`) into a new buffer of layout `to_md`, or returns from's own
// address when the reorder is null (the layouts agree). `keep` owns the new buffer.
void* Reordered(const Api& api, const PrimitiveDesc* reorder, const dnnl_memory_desc_t& from_md, void* from,
                const dnnl_memory_desc_t& to_md, std::unique_ptr<Buffer>& keep) {
  if (reorder == nullptr) return from;
  keep = std::make_unique<Buffer>(api.dnnl_memory_desc_get_size(&to_md));
  Memory src(api, from_md, from), dst(api, to_md, keep->data());
  Execute(api, *reorder, {{DNNL_ARG_FROM, src.mem}, {DNNL_ARG_TO, dst.mem}}, "reorder");
  return keep->data();
}

// Writes `from` (layout `from_md`) into `to` (layout `to_md`) through `reorder`.
void ReorderInto(const Api& api, const PrimitiveDesc& reorder, const dnnl_memory_desc_t& from_md, void* from,
                 const dnnl_memory_desc_t& to_md, void* to) {
  Memory src(api, from_md, from), dst(api, to_md, to);
  Execute(api, reorder, {{DNNL_ARG_FROM, src.mem}, {DNNL_ARG_TO, dst.mem}}, "reorder");
}

// The user's layouts (u_*) and the primitive's (nhwc activations, its chosen weights).
struct Layouts {
  Md u_x, u_w, u_y;  // user input, weights, output (or its gradient)
  Md x, y, w_any, bias;
};

Layouts MakeLayouts(const Api& api, const View& x, const View& w, const View& y) {
  Layouts l;
  l.u_x = ByStrides(api, x.dims, x.strides);
  l.u_w = ByStrides(api, w.dims, w.strides);
  l.u_y = ByStrides(api, y.dims, y.strides);
  l.x = ByTag(api, x.dims, dnnl_nhwc);
  l.y = ByTag(api, y.dims, dnnl_nhwc);
  l.w_any = ByTag(api, w.dims, dnnl_format_tag_any);
  l.bias = ByTag(api, {y.dims[1]}, dnnl_a);
  return l;
}

struct ForwardPlan {
  Layouts l;
  std::unique_ptr<PrimitiveDesc> conv, x_in, w_in, y_out;
};

std::shared_ptr<const ForwardPlan> MakeForwardPlan(const Api& api, const View& x, const View& w, const View& y,
                                                   bool has_bias, const ConvParams& p) {
  auto plan = std::make_shared<ForwardPlan>();
  plan->l = MakeLayouts(api, x, w, y);
  const Layouts& l = plan->l;
  const ConvDims c = MakeConvDims(p);
  dnnl_convolution_desc_t desc;
  Check(api.dnnl_dilated_convolution_forward_desc_init(&desc, dnnl_forward_inference, dnnl_convolution_direct, &l.x.md,
                                                       &l.w_any.md, has_bias ? &l.bias.md : nullptr, &l.y.md,
                                                       c.strides.data(), c.dilates.data(), c.pad_l.data(),
                                                       c.pad_r.data()),
        "dnnl_dilated_convolution_forward_desc_init");
  plan->conv = std::make_unique<PrimitiveDesc>();
  plan->conv->api = &api;
  Attr attr(api);
  const dnnl_status_t created =
      api.dnnl_primitive_desc_create(&plan->conv->pd, &desc, attr.attr, api.engine, nullptr);
  if (!Finish(api, plan->conv, created) ||
      !plan->conv->Optimized())
    return nullptr;
  plan->x_in = MakeReorder(api, l.u_x.md, l.x.md);
  plan->w_in = MakeReorder(api, l.u_w.md, *plan->conv->Query(dnnl_query_weights_md));
  plan->y_out = MakeReorder(api, l.y.md, l.u_y.md);
  return plan;
}

struct BackwardPlan {
  Layouts l;
  Md u_gi, u_gw;  // the gradients' user layouts (when asked for)
  std::unique_ptr<PrimitiveDesc> data, weights;  // either may be null (not asked for)
  std::unique_ptr<PrimitiveDesc> dy_in, x_in, w_in, gi_out, gw_out;
};

std::shared_ptr<const BackwardPlan> MakeBackwardPlan(const Api& api, const View& x, const View& w, const View& dy,
                                                     const View* gi, const View* gw, const ConvParams& p) {
  auto plan = std::make_shared<BackwardPlan>();
  plan->l = MakeLayouts(api, x, w, dy);
  const bool want_gi = gi != nullptr, want_gw = gw != nullptr;
  if (want_gi) plan->u_gi = ByStrides(api, gi->dims, gi->strides);
  if (want_gw) plan->u_gw = ByStrides(api, gw->dims, gw->strides);
  const Layouts& l = plan->l;
  const ConvDims c = MakeConvDims(p);
  // The forward descriptor is the backward ones' hint (oneDNN picks matching implementations).
  dnnl_convolution_desc_t fwd_desc;
  Check(api.dnnl_dilated_convolution_forward_desc_init(&fwd_desc, dnnl_forward_training, dnnl_convolution_direct,
                                                       &l.x.md, &l.w_any.md, nullptr, &l.y.md, c.strides.data(),
                                                       c.dilates.data(), c.pad_l.data(), c.pad_r.data()),
        "dnnl_dilated_convolution_forward_desc_init");
  auto hint = std::make_unique<PrimitiveDesc>();
  hint->api = &api;
  Attr attr(api);
  if (api.dnnl_primitive_desc_create(&hint->pd, &fwd_desc, attr.attr, api.engine, nullptr) != dnnl_success)
    return nullptr;
  if (want_gi) {
    dnnl_convolution_desc_t desc;
    Check(api.dnnl_dilated_convolution_backward_data_desc_init(&desc, dnnl_convolution_direct, &l.x.md, &l.w_any.md,
                                                               &l.y.md, c.strides.data(), c.dilates.data(),
                                                               c.pad_l.data(), c.pad_r.data()),
          "dnnl_dilated_convolution_backward_data_desc_init");
    plan->data = std::make_unique<PrimitiveDesc>();
    plan->data->api = &api;
    const dnnl_status_t created =
        api.dnnl_primitive_desc_create(&plan->data->pd, &desc, attr.attr, api.engine, hint->pd);
    if (!Finish(api, plan->data, created) ||
        !plan->data->Optimized())
      return nullptr;
    plan->w_in = MakeReorder(api, l.u_w.md, *plan->data->Query(dnnl_query_weights_md));
    plan->gi_out = MakeReorder(api, l.x.md, plan->u_gi.md);
  }
  if (want_gw) {
    dnnl_convolution_desc_t desc;
    Check(api.dnnl_dilated_convolution_backward_weights_desc_init(&desc, dnnl_convolution_direct, &l.x.md,
                                                                  &l.w_any.md, nullptr, &l.y.md, c.strides.data(),
                                                                  c.dilates.data(), c.pad_l.data(), c.pad_r.data()),
          "dnnl_dilated_convolution_backward_weights_desc_init");
    plan->weights = std::make_unique<PrimitiveDesc>();
    plan->weights->api = &api;
    if (!Finish(api, plan->weights,
                api.dnnl_primitive_desc_create(&plan->weights->pd, &desc, attr.attr, api.engine, hint->pd)) ||
        !plan->weights->Optimized())
      return nullptr;
    plan->x_in = MakeReorder(api, l.u_x.md, l.x.md);
    plan->gw_out = MakeReorder(api, *plan->weights->Query(dnnl_query_diff_weights_md), plan->u_gw.md);
  }
  plan->dy_in = MakeReorder(api, l.u_y.md, l.y.md);
  return plan;
}

// Below this many output positions per weight (N * oh * ow) kiln's own kernel runs (see the banner).
constexpr int64_t kMinWeightReuse = 128;

// The shared preconditions: oneDNN loaded and enabled, a plain float32 CPU convolution whose
// weights are reused enough; y is its output (or output gradient).
const Api* Applicable(const Tensor& x, const Tensor& w, const Tensor& y, const ConvParams& p) {
  if (p.transposed || x.dtype() != ScalarType::Float32 || w.dtype() != ScalarType::Float32 ||
      !x.device().is_cpu())
    return nullptr;
  int64_t reuse = y.size(0);
  for (int64_t d = 2; d < y.dim(); ++d) reuse *= y.size(d);
  if (reuse < kMinWeightReuse) return nullptr;
  return onednn::Get();
}

void* Address(const Tensor& t) { return const_cast<void*>(static_cast<const void*>(t.data_ptr<float>())); }

// Note [Batches split across kiln's threads]: Debian's oneDNN parallelises on OpenMP, whose team
// and kiln's pool took turns on the same two cores badly (resnet18's forward at two threads ran
// barely faster than at one, each conv alone twice as fast). So when the batch has at least as
// many samples as kiln has threads, oneDNN runs single-threaded, one chunk of the batch per task
// of kiln's own pool (ParallelFor): convolution and its input gradient are independent per
// sample, and the weight gradient is the sum of the chunks' (in oneDNN's layout, summed before it
// is reordered out). Smaller batches keep OpenMP's team of kiln's thread count.
struct Split {
  int64_t tasks;  // batch chunks, one per task
  int omp;        // OpenMP threads per oneDNN call
};
Split SplitBatch(int64_t batch) {
  const int64_t threads = GetNumThreads();
  if (threads > 1 && batch >= threads) return {threads, 1};
  return {1, static_cast<int>(threads)};
}

// Chunk k of `tasks` over a batch of n: its first sample and size.
std::pair<int64_t, int64_t> Chunk(int64_t n, int64_t tasks, int64_t k) {
  const int64_t n0 = n * k / tasks, n1 = n * (k + 1) / tasks;
  return {n0, n1 - n0};
}

// Runs fn(k, n0, nb) for each non-empty chunk k of the split (samples [n0, n0 + nb)) on kiln's
// pool, each task's oneDNN calls on split.omp OpenMP threads.
template <typename Fn>
void ForEachChunk(const Api& api, int64_t batch, const Split& split, const Fn& fn) {
  ParallelFor(0, split.tasks, 1, [&](int64_t begin, int64_t end) {
    onednn::SetThreads(api, split.omp);
    for (int64_t k = begin; k < end; ++k) {
      const auto [n0, nb] = Chunk(batch, split.tasks, k);
      if (nb > 0) fn(k, n0, nb);
    }
  });
}

View WithBatch(const View& v, int64_t n) {
  View c = v;
  c.dims[0] = n;
  return c;
}

// The address of sample n0 of t (a float tensor; t's batch is its dim 0).
void* Sample(const Tensor& t, int64_t n0) { return static_cast<float*>(Address(t)) + n0 * t.stride(0); }

// The plans for each chunk size of a split (at most two sizes), built before any chunk runs so
// that a shape oneDNN cannot do is refused while nothing has been written yet.
template <typename Plan, typename Make>
bool PlansBySize(int64_t batch, const Split& split, const Make& make,
                 std::map<int64_t, std::shared_ptr<const Plan>>* plans) {
  for (int64_t k = 0; k < split.tasks; ++k) {
    const int64_t nb = Chunk(batch, split.tasks, k).second;
    if (nb == 0 || plans->count(nb)) continue;
    auto plan = make(nb);
    if (plan == nullptr) return false;
    plans->emplace(nb, std::move(plan));
  }
  return true;
}

}  // namespace

bool ConvolutionOneDnn(const Tensor& x_in, const Tensor& w_in, const Tensor* bias, const Tensor& out,
                       const ConvParams& p) {
  const Api* api = Applicable(x_in, w_in, out, p);
  if (api == nullptr || !Addressable(out)) return false;
  const Tensor x = Addressable(x_in) ? x_in : ops::contiguous(x_in);
  const Tensor w = Addressable(w_in) ? w_in : ops::contiguous(w_in);
  const Tensor b = bias != nullptr ? ops::contiguous(*bias) : Tensor();
  const View vx = Activation(x), vw = Weights(w, p.groups), vy = Activation(out);
  const int64_t batch = vx.dims[0];
  const Split split = SplitBatch(batch);
  onednn::SetThreads(*api, split.omp);  // before a plan is made: its primitives keep the thread count
  static PlanCache<ForwardPlan> cache;
  std::map<int64_t, std::shared_ptr<const ForwardPlan>> plans;
  auto make = [&](int64_t nb) {
    const View cx = WithBatch(vx, nb), cy = WithBatch(vy, nb);
    return cache.Get(MakeKey(b.defined() ? 1 : 0, split.omp, p, {&cx, &vw, &cy}),
                     [&] { return MakeForwardPlan(*api, cx, vw, cy, b.defined(), p); });
  };
  if (!PlansBySize<ForwardPlan>(batch, split, make, &plans)) return false;
  // the weights in each plan's layout, reordered once for all chunks
  std::map<int64_t, std::unique_ptr<Buffer>> w_bufs;
  std::map<int64_t, void*> w_ptrs;
  for (const auto& [nb, plan] : plans) {
    w_ptrs[nb] = Reordered(*api, plan->w_in.get(), plan->l.u_w.md, Address(w),
                           *plan->conv->Query(dnnl_query_weights_md), w_bufs[nb]);
  }
  ForEachChunk(*api, batch, split, [&](int64_t, int64_t n0, int64_t nb) {
    const ForwardPlan& plan = *plans.at(nb);
    const Layouts& l = plan.l;
    std::unique_ptr<Buffer> x_buf, y_buf;
    void* xp = Reordered(*api, plan.x_in.get(), l.u_x.md, Sample(x, n0), l.x.md, x_buf);
    void* yp = Sample(out, n0);
    if (plan.y_out != nullptr) {
      y_buf = std::make_unique<Buffer>(api->dnnl_memory_desc_get_size(&l.y.md));
      yp = y_buf->data();
    }
    {
      Memory mx(*api, l.x.md, xp), mw(*api, *plan.conv->Query(dnnl_query_weights_md), w_ptrs.at(nb));
      Memory my(*api, l.y.md, yp);
      std::vector<dnnl_exec_arg_t> args = {{DNNL_ARG_SRC, mx.mem}, {DNNL_ARG_WEIGHTS, mw.mem},
                                           {DNNL_ARG_DST, my.mem}};
      std::unique_ptr<Memory> mb;
      if (b.defined()) {
        mb = std::make_unique<Memory>(*api, l.bias.md, Address(b));
        args.push_back({DNNL_ARG_BIAS, mb->mem});
      }
      Execute(*api, *plan.conv, args, "convolution forward");
    }
    if (plan.y_out != nullptr) ReorderInto(*api, *plan.y_out, l.y.md, yp, l.u_y.md, Sample(out, n0));
  });
  g_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool ConvolutionBackwardOneDnn(const Tensor& dy_in, const Tensor& x_in, const Tensor& w_in, const ConvParams& p,
                               const Tensor* gi, const Tensor* gw) {
  const Api* api = Applicable(x_in, w_in, dy_in, p);
  if (api == nullptr || dy_in.dtype() != ScalarType::Float32 || (gi == nullptr && gw == nullptr) ||
      (gi != nullptr && !Addressable(*gi)) || (gw != nullptr && !Addressable(*gw)))
    return false;
  const Tensor x = Addressable(x_in) ? x_in : ops::contiguous(x_in);
  const Tensor w = Addressable(w_in) ? w_in : ops::contiguous(w_in);
  const Tensor dy = Addressable(dy_in) ? dy_in : ops::contiguous(dy_in);
  const View vx = Activation(x), vw = Weights(w, p.groups), vy = Activation(dy);
  std::optional<View> vgi, vgw;
  if (gi != nullptr) vgi = Activation(*gi);
  if (gw != nullptr) vgw = Weights(*gw, p.groups);
  const int64_t batch = vx.dims[0];
  Split split = SplitBatch(batch);
  static PlanCache<BackwardPlan> cache;
  std::map<int64_t, std::shared_ptr<const BackwardPlan>> plans;
  auto make = [&](int64_t nb) {
    const View cx = WithBatch(vx, nb), cy = WithBatch(vy, nb);
    std::optional<View> cgi;
    if (vgi) cgi = WithBatch(*vgi, nb);
    const View* pgi = cgi ? &*cgi : nullptr;
    const View* pgw = vgw ? &*vgw : nullptr;
    return cache.Get(MakeKey(2, split.omp, p, {&cx, &vw, &cy, pgi, pgw}),
                     [&] { return MakeBackwardPlan(*api, cx, vw, cy, pgi, pgw, p); });
  };
  onednn::SetThreads(*api, split.omp);  // before a plan is made: its primitives keep the thread count
  if (!PlansBySize<BackwardPlan>(batch, split, make, &plans)) return false;
  if (gw != nullptr && plans.size() > 1) {
    // the chunks' weight gradients are summed as they lie: their layouts must agree
    const auto& a = *plans.begin()->second->weights->Query(dnnl_query_diff_weights_md);
    const auto& z = *plans.rbegin()->second->weights->Query(dnnl_query_diff_weights_md);
    if (!api->dnnl_memory_desc_equal(&a, &z)) {
      split = {1, static_cast<int>(GetNumThreads())};
      onednn::SetThreads(*api, split.omp);
      plans.clear();
      if (!PlansBySize<BackwardPlan>(batch, split, make, &plans)) return false;
    }
  }
  // the weights in each plan's layout (for the input gradient), reordered once for all chunks
  std::map<int64_t, std::unique_ptr<Buffer>> w_bufs;
  std::map<int64_t, void*> w_ptrs;
  if (gi != nullptr) {
    for (const auto& [nb, plan] : plans) {
      w_ptrs[nb] = Reordered(*api, plan->w_in.get(), plan->l.u_w.md, Address(w),
                             *plan->data->Query(dnnl_query_weights_md), w_bufs[nb]);
    }
  }
  // each chunk's weight gradient, in oneDNN's layout
  const dnnl_memory_desc_t* gw_md =
      gw != nullptr ? plans.begin()->second->weights->Query(dnnl_query_diff_weights_md) : nullptr;
  const size_t gw_bytes = gw_md != nullptr ? api->dnnl_memory_desc_get_size(gw_md) : 0;
  std::vector<std::unique_ptr<Buffer>> gw_parts(split.tasks);
  ForEachChunk(*api, batch, split, [&](int64_t k, int64_t n0, int64_t nb) {
    const BackwardPlan& plan = *plans.at(nb);
    const Layouts& l = plan.l;
    std::unique_ptr<Buffer> dy_buf, x_buf, gi_buf;
    void* dyp = Reordered(*api, plan.dy_in.get(), l.u_y.md, Sample(dy, n0), l.y.md, dy_buf);
    if (gi != nullptr) {
      void* gip = Sample(*gi, n0);
      if (plan.gi_out != nullptr) {
        gi_buf = std::make_unique<Buffer>(api->dnnl_memory_desc_get_size(&l.x.md));
        gip = gi_buf->data();
      }
      {
        Memory mdy(*api, l.y.md, dyp), mw(*api, *plan.data->Query(dnnl_query_weights_md), w_ptrs.at(nb));
        Memory mgi(*api, l.x.md, gip);
        Execute(*api, *plan.data,
                {{DNNL_ARG_DIFF_DST, mdy.mem}, {DNNL_ARG_WEIGHTS, mw.mem}, {DNNL_ARG_DIFF_SRC, mgi.mem}},
                "convolution backward data");
      }
      if (plan.gi_out != nullptr) ReorderInto(*api, *plan.gi_out, l.x.md, gip, plan.u_gi.md, Sample(*gi, n0));
    }
    if (gw != nullptr) {
      void* xp = Reordered(*api, plan.x_in.get(), l.u_x.md, Sample(x, n0), l.x.md, x_buf);
      gw_parts[k] = std::make_unique<Buffer>(gw_bytes);
      Memory mdy(*api, l.y.md, dyp), mx(*api, l.x.md, xp), mgw(*api, *gw_md, gw_parts[k]->data());
      Execute(*api, *plan.weights,
              {{DNNL_ARG_DIFF_DST, mdy.mem}, {DNNL_ARG_SRC, mx.mem}, {DNNL_ARG_DIFF_WEIGHTS, mgw.mem}},
              "convolution backward weights");
    }
  });
  if (gw != nullptr) {
    // sum the chunks' gradients into the first, then write it out in gw's layout
    float* total = nullptr;
    for (auto& part : gw_parts) {
      if (part == nullptr) continue;
      float* v = static_cast<float*>(part->data());
      if (total == nullptr) {
        total = v;
        continue;
      }
      for (size_t i = 0, n = gw_bytes / sizeof(float); i < n; ++i) total[i] += v[i];
    }
    const BackwardPlan& plan = *plans.begin()->second;
    if (plan.gw_out != nullptr) ReorderInto(*api, *plan.gw_out, *gw_md, total, plan.u_gw.md, Address(*gw));
    else std::memcpy(Address(*gw), total, gw_bytes);
  }
  g_calls.fetch_add(1, std::memory_order_relaxed);
  return true;
}

#else  // !KILN_HAVE_ONEDNN

bool ConvolutionOneDnn(const Tensor&, const Tensor&, const Tensor*, const Tensor&, const ConvParams&) { return false; }
bool ConvolutionBackwardOneDnn(const Tensor&, const Tensor&, const Tensor&, const ConvParams&, const Tensor*,
                               const Tensor*) {
  return false;
}

#endif

}  // namespace kiln
