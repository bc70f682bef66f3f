// tensor/ops/attention.cc: scaled dot-product attention as one fused CPU kernel, forward and
// backward: PyTorch's _scaled_dot_product_flash_attention_for_cpu and its _backward, which
// F.scaled_dot_product_attention picks on the CPU where it can (python/kiln/nn/functional.py).
//
// Note [Flash attention on the CPU]: query [B, H, L, E] against key and value [B, Hk, S, E] (H a
// multiple of Hk: grouped-query attention reads key/value head h / (H / Hk)). The forward takes
// blocks of kQBlock query rows, one task each, and walks the keys in blocks of kKvBlock: scores =
// scale * Q K^T by one GEMM, plus the float mask or -inf above the diagonal (is_causal: row i sees
// keys j <= i, PyTorch's top-left alignment; blocks wholly above it are skipped), then the online
// softmax: a row's running max m and sum l are rescaled by exp(m_old - m_new) as a later block
// raises the max, and the output accumulates P V by a second GEMM. The L x S score matrix is never
// made, and there is no mask tensor, no all()/where pass (the math path's safe softmax). Outputs:
// acc / l, and logsumexp m + log l per row, which the backward uses to recompute P = exp(S - lse)
// block by block. The backward runs a task per (batch, key/value head), so the sums into dK and
// dV (over query rows, and over the query heads sharing a key/value head) have one writer:
//   dV += P^T dO,  dP = dO V^T,  dS = P (dP - rowsum(dO * O)),  dQ += scale dS K,  dK += scale dS^T Q.
// A row every key of which is masked gives output 0 and logsumexp 0 (PyTorch's flash kernel; the
// math path's safe softmax gives 0 too), and no gradient. A NaN score makes its row NaN.
// Arithmetic is in float (double for float64): float16/bfloat16 inputs are converted first and
// the results back, logsumexp stays float32, as PyTorch's. Layouts are PyTorch's: the output and
// each gradient have their input's dense layout (a query that is a transposed [B, L, H, E] view
// gives an output in that layout, so the usual transpose back and reshape copies nothing), and
// logsumexp is [B, H, L] over [B, L, H] memory.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>
#include <type_traits>
#include <vector>

#include "runtime/thread_pool.h"
#include "tensor/ops/common.h"
#include "tensor/ops/gemm.h"
#include "tensor/ops/softmax_rows.h"

namespace kiln {
namespace {

using OptTensor = std::optional<Tensor>;
using Tensor2 = std::tuple<Tensor, Tensor>;
using Tensor3 = std::tuple<Tensor, Tensor, Tensor>;
using Meta2 = std::tuple<TensorMeta, TensorMeta>;
using Meta3 = std::tuple<TensorMeta, TensorMeta, TensorMeta>;

constexpr const char* kName = "scaled_dot_product_attention_flash_attention";
constexpr int64_t kQBlock = 64, kKvBlock = 512;

bool Defined(const OptTensor& t) { return t.has_value() && t->defined(); }

bool Supported(ScalarType t) {
  return t == ScalarType::Float32 || t == ScalarType::Float64 || t == ScalarType::BFloat16 ||
         t == ScalarType::Float16;
}

void CheckInputs(const Tensor& q, const Tensor& k, const Tensor& v, double dropout_p, const OptTensor& mask) {
  KILN_CHECK(dropout_p == 0.0, kName, ": Currently do not support dropout > 0");
  KILN_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, kName, ": Accept only 4 dims inputs shape of {B, H, T, K}");
  KILN_CHECK(Supported(q.dtype()), kName, ": Expected data type in FP32, FP64, BF16, FP16, but got ",
             ScalarTypeDisplayName(q.dtype()), " instead.");
  for (const Tensor* t : {&k, &v})
    KILN_CHECK(t->dtype() == q.dtype(), "expected scalar type ", ScalarTypeDisplayName(q.dtype()), " but found ",
               ScalarTypeDisplayName(t->dtype()));
  const SymDimVector &qs = q->sym_sizes(), &ks = k->sym_sizes(), &vs = v->sym_sizes();
  KILN_CHECK(qs[3] == ks[3] && qs[3] == vs[3], kName, ": Q/K/V should have the same head size");
  KILN_CHECK(qs[0] == ks[0] && qs[0] == vs[0], kName, ": Q/K/V should have the same batch size, but got ",
             ShapeStr(q), ", ", ShapeStr(k), " and ", ShapeStr(v));
  KILN_CHECK(ks[1] == vs[1] && ks[2] == vs[2], kName, ": key and value should have the same number of heads and "
             "sequence length, but got ", ShapeStr(k), " and ", ShapeStr(v));
  const auto hq = qs[1].maybe_as_int(), hk = ks[1].maybe_as_int();
  KILN_CHECK(!hq || !hk || (*hk > 0 && *hq % *hk == 0), kName, ": the number of query heads (", *hq,
             ") must be a multiple of the number of key/value heads (", hk ? *hk : 0, ")");
  if (Defined(mask)) {
    KILN_CHECK(mask->dtype() == q.dtype(), kName, ": Attention mask is the same data type as query");
    KILN_CHECK(mask->dim() == 2 || mask->dim() == 4, kName, ": Attention mask dim in {2, 4}");
  }
}

// Strides of a dense tensor shaped like `t` whose first three dims are laid out in t's order of
// them (as an elementwise result's, comparing symbolic strides under guards), the last dim
// innermost: the layout these ops give their outputs and gradients.
SymDimVector DenseLikeStrides(const Tensor& t) {
  const SymDimVector& sizes = t->sym_sizes();
  const SymDimVector& st = t->sym_strides();
  SymDimVector outer = LayoutOfOperands({sizes[0], sizes[1], sizes[2]}, {{st[0], st[1], st[2]}});
  if (outer.empty()) outer = {sizes[1] * sizes[2], sizes[2], SymInt(1)};  // undecidable: row-major
  return {outer[0] * sizes[3], outer[1] * sizes[3], outer[2] * sizes[3], SymInt(1)};
}

ScalarType AccType(ScalarType t) { return t == ScalarType::Float64 ? ScalarType::Float64 : ScalarType::Float32; }

// logsumexp: [B, H, L] over [B, L, H] memory.
TensorMeta LseMeta(const Tensor& q) {
  const SymDimVector& s = q->sym_sizes();
  return TensorMeta{{s[0], s[1], s[2]}, {s[2] * s[1], SymInt(1), s[1]}, AccType(q.dtype()), q.device()};
}

Meta2 FlashForwardMeta(const Tensor& q, const Tensor& k, const Tensor& v, double dropout_p, bool is_causal,
                       const OptTensor& mask, std::optional<double> scale) {
  (void)is_causal;
  (void)scale;
  CheckInputs(q, k, v, dropout_p, mask);
  return {TensorMeta{q->sym_sizes(), DenseLikeStrides(q), q.dtype(), q.device()}, LseMeta(q)};
}

Meta3 FlashBackwardMeta(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Tensor& out, const Tensor& lse, double dropout_p, bool is_causal, const OptTensor& mask,
                        std::optional<double> scale) {
  (void)is_causal;
  (void)scale;
  CheckInputs(q, k, v, dropout_p, mask);
  for (const Tensor* t : {&grad_out, &out})
    KILN_CHECK((*t)->sym_sizes() == q->sym_sizes() && t->dtype() == q.dtype(), kName,
               ": grad_out and out must have the query's shape and dtype, but got ", ShapeStr(*t), " and ",
               ShapeStr(q));
  KILN_CHECK(lse.dim() == 3 && lse.dtype() == AccType(q.dtype()), kName,
             ": logsumexp must be the forward's [B, H, L] result");
  return {TensorMeta{q->sym_sizes(), DenseLikeStrides(q), q.dtype(), q.device()},
          TensorMeta{k->sym_sizes(), DenseLikeStrides(k), k.dtype(), k.device()},
          TensorMeta{v->sym_sizes(), DenseLikeStrides(v), v.dtype(), v.device()}};
}

// A [B, H, T, E] operand in the accumulation type with its last dim contiguous, as the kernels
// read it: pointer and element strides of its first three dims.
template <typename A>
struct Operand {
  Tensor held;
  const A* data;
  int64_t sb, sh, st;
  Operand(const Tensor& t, ScalarType acc) {
    held = ops::to_dtype(t, acc);
    if (held.stride(3) != 1 && held.size(3) > 1) held = ops::contiguous(held);
    data = held.template data_ptr<A>();
    sb = held.stride(0), sh = held.stride(1), st = held.stride(2);
  }
  const A* At(int64_t b, int64_t h, int64_t t) const { return data + b * sb + h * sh + t * st; }
};

// The float mask broadcast to [B, H, L, S] (strides 0 along broadcast dims), or none.
template <typename A>
struct Mask {
  Tensor held;
  const A* data = nullptr;
  int64_t sb = 0, sh = 0, sl = 0, ss = 0;
  Mask(const OptTensor& mask, int64_t B, int64_t H, int64_t L, int64_t S, ScalarType acc) {
    if (!Defined(mask)) return;
    Tensor m = ops::to_dtype(*mask, acc);
    if (m.dim() == 2) m = ops::view(m, {SymInt(1), SymInt(1), m->sym_sizes()[0], m->sym_sizes()[1]});
    held = ops::expand(m, {SymInt(B), SymInt(H), SymInt(L), SymInt(S)});
    data = held.template data_ptr<A>();
    sb = held.stride(0), sh = held.stride(1), sl = held.stride(2), ss = held.stride(3);
  }
};

// Adds the mask and the causal -inf to a block of scores: rows [i0, i0 + rows), keys [j0, j0 + n).
template <typename A>
void MaskScores(A* s, int64_t lds, int64_t rows, int64_t n, int64_t i0, int64_t j0, bool causal, const Mask<A>& mask,
                int64_t b, int64_t h) {
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    A* row = s + r * lds;
    if (mask.data) {
      const A* m = mask.data + b * mask.sb + h * mask.sh + (i0 + r) * mask.sl + j0 * mask.ss;
      if (mask.ss == 1) {
        for (int64_t c = 0; c < n; ++c) row[c] += m[c];
      } else {
        for (int64_t c = 0; c < n; ++c) row[c] += m[c * mask.ss];
      }
    }
    if (causal)
      for (int64_t c = std::max<int64_t>(0, i0 + r + 1 - j0); c < n; ++c) row[c] = kNegInf;
  }
}

// The keys a block of query rows [i0, i0 + rows) sees: all S, or under is_causal those up to its
// last row (key blocks wholly above the diagonal are skipped).
inline int64_t KeysSeen(bool causal, int64_t S, int64_t i0, int64_t rows) {
  return causal ? std::min(S, i0 + rows) : S;
}

// The masked scores scale * Q K^T (+ mask, -inf above the diagonal) of query rows [i0, i0 + rows)
// of head h against keys [j0, j0 + n) of key/value head hk, into s (row pitch `width`).
template <typename A>
void BlockScores(const Operand<A>& q, const Operand<A>& k, const Mask<A>& mask, bool causal, A scale, int64_t b,
                 int64_t h, int64_t hk, int64_t i0, int64_t rows, int64_t j0, int64_t n, int64_t E, A* s,
                 int64_t width) {
  Gemm<A>(false, true, rows, n, E, scale, q.At(b, h, i0), q.st, k.At(b, hk, j0), k.st, A(0), s, width);
  MaskScores(s, width, rows, n, i0, j0, causal, mask, b, h);
}

// The row max that keeps NaN, and the row's sum of exp(x - mx) with the exps written over x.
template <typename A>
A RowMax(const A* x, int64_t n) {
  if constexpr (std::is_same_v<A, float>) {
    return softmax_rows::RowMax(x, n);
  } else {
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t c = 0; c < n; ++c) m = (x[c] > m || x[c] != x[c]) ? x[c] : m;
    return m;
  }
}

template <typename A>
A ExpInPlace(A* x, A mx, int64_t n) {
  if constexpr (std::is_same_v<A, float>) {
    return softmax_rows::ExpSum<true>(x, mx, x, n);
  } else {
    A sum = 0;
    for (int64_t c = 0; c < n; ++c) sum += (x[c] = std::exp(x[c] - mx));
    return sum;
  }
}

// The forward over every (batch, head, block of query rows): out and lse written through their
// strides (out: b, h, l; lse: [B, L, H] memory).
template <typename A>
void FlashForward(const Operand<A>& q, const Operand<A>& k, const Operand<A>& v, const Mask<A>& mask, bool causal,
                  A scale, int64_t B, int64_t H, int64_t Hk, int64_t L, int64_t S, int64_t E, A* out,
                  const int64_t* os, A* lse) {
  const int64_t q_blocks = (L + kQBlock - 1) / kQBlock, group = H / Hk;
  const int64_t width = std::max<int64_t>(1, std::min(S, kKvBlock));
  ParallelFor(0, B * H * q_blocks, 1, [&](int64_t begin, int64_t end) {
    std::vector<A> scores(kQBlock * width), acc(kQBlock * E), row_max(kQBlock), row_sum(kQBlock);
    RunForCpu([&] {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / (H * q_blocks), h = task / q_blocks % H, i0 = task % q_blocks * kQBlock;
        const int64_t rows = std::min(kQBlock, L - i0), hk = h / group;
        std::fill(acc.begin(), acc.end(), A(0));
        std::fill(row_max.begin(), row_max.end(), -std::numeric_limits<A>::infinity());
        std::fill(row_sum.begin(), row_sum.end(), A(0));
        const int64_t kv_end = KeysSeen(causal, S, i0, rows);
        for (int64_t j0 = 0; j0 < kv_end; j0 += kKvBlock) {
          const int64_t n = std::min(kKvBlock, kv_end - j0);
          BlockScores(q, k, mask, causal, scale, b, h, hk, i0, rows, j0, n, E, scores.data(), width);
          for (int64_t r = 0; r < rows; ++r) {
            A* s = scores.data() + r * width;
            const A m_old = row_max[r], m_block = RowMax(s, n);
            const A m_new = (m_old > m_block || m_old != m_old) ? m_old : m_block;
            if (m_new == -std::numeric_limits<A>::infinity()) {  // every key so far masked
              std::fill(s, s + n, A(0));
              continue;
            }
            const A alpha = std::exp(m_old - m_new);  // 0 while the row had no finite score
            row_sum[r] = row_sum[r] * alpha + ExpInPlace(s, m_new, n);
            row_max[r] = m_new;
            if (alpha != A(1))
              for (int64_t e = 0; e < E; ++e) acc[r * E + e] *= alpha;
          }
          Gemm<A>(false, false, rows, E, n, A(1), scores.data(), width, v.At(b, hk, j0), v.st, A(1), acc.data(), E);
        }
        for (int64_t r = 0; r < rows; ++r) {
          A* o = out + b * os[0] + h * os[1] + (i0 + r) * os[2];
          const A l = row_sum[r];
          const A inv = l == A(0) ? A(0) : A(1) / l;
          for (int64_t e = 0; e < E; ++e) o[e] = acc[r * E + e] * inv;
          lse[(b * L + i0 + r) * H + h] = l == A(0) ? A(0) : row_max[r] + std::log(l);
        }
      }
    });
  });
}

// The backward over every (batch, key/value head): dq, dk, dv (zeroed) accumulated through their
// strides (b, h, t), lse read from [B, L, H] memory.
template <typename A>
void FlashBackward(const Operand<A>& dout, const Operand<A>& q, const Operand<A>& k, const Operand<A>& v,
                   const Operand<A>& out, const A* lse, const Mask<A>& mask, bool causal, A scale, int64_t B, int64_t H,
                   int64_t Hk, int64_t L, int64_t S, int64_t E, A* dq, const int64_t* dqs, A* dk, const int64_t* dks,
                   A* dv, const int64_t* dvs) {
  const int64_t group = H / Hk, width = std::max<int64_t>(1, std::min(S, kKvBlock));
  ParallelFor(0, B * Hk, 1, [&](int64_t begin, int64_t end) {
    std::vector<A> p(kQBlock * width), dp(kQBlock * width), delta(L);
    RunForCpu([&] {
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / Hk, hk = task % Hk;
        A* dk_bh = dk + b * dks[0] + hk * dks[1];
        A* dv_bh = dv + b * dvs[0] + hk * dvs[1];
        for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
          for (int64_t i = 0; i < L; ++i) {  // rowsum(dO * O)
            const A *g = dout.At(b, h, i), *o = out.At(b, h, i);
            A sum = 0;
            for (int64_t e = 0; e < E; ++e) sum += g[e] * o[e];
            delta[i] = sum;
          }
          A* dq_bh = dq + b * dqs[0] + h * dqs[1];
          for (int64_t i0 = 0; i0 < L; i0 += kQBlock) {
            const int64_t rows = std::min(kQBlock, L - i0);
            const int64_t kv_end = KeysSeen(causal, S, i0, rows);
            for (int64_t j0 = 0; j0 < kv_end; j0 += kKvBlock) {
              const int64_t n = std::min(kKvBlock, kv_end - j0);
              BlockScores(q, k, mask, causal, scale, b, h, hk, i0, rows, j0, n, E, p.data(), width);
              for (int64_t r = 0; r < rows; ++r) {  // P = exp(S - lse): the forward's softmax
                A* s = p.data() + r * width;
                const A l = lse[(b * L + i0 + r) * H + h];
                if constexpr (std::is_same_v<A, float>) {
                  for (int64_t c = 0; c < n; ++c) s[c] = ExpF(s[c] - l);
                } else {
                  for (int64_t c = 0; c < n; ++c) s[c] = std::exp(s[c] - l);
                }
              }
              Gemm<A>(true, false, n, E, rows, A(1), p.data(), width, dout.At(b, h, i0), dout.st, A(1),
                      dv_bh + j0 * dvs[2], dvs[2]);
              Gemm<A>(false, true, rows, n, E, A(1), dout.At(b, h, i0), dout.st, v.At(b, hk, j0), v.st, A(0),
                      dp.data(), width);
              for (int64_t r = 0; r < rows; ++r) {  // dS = P (dP - rowsum(dO * O))
                const A* pr = p.data() + r * width;
                A* d = dp.data() + r * width;
                const A di = delta[i0 + r];
                for (int64_t c = 0; c < n; ++c) d[c] = pr[c] * (d[c] - di);
              }
              Gemm<A>(false, false, rows, E, n, scale, dp.data(), width, k.At(b, hk, j0), k.st, A(1),
                      dq_bh + i0 * dqs[2], dqs[2]);
              Gemm<A>(true, false, n, E, rows, scale, dp.data(), width, q.At(b, h, i0), q.st, A(1),
                      dk_bh + j0 * dks[2], dks[2]);
            }
          }
        }
      }
    });
  });
}

// The kernels read every operand's memory on the host.
void CheckOnCpu(std::initializer_list<const Tensor*> tensors) {
  for (const Tensor* t : tensors)
    KILN_CHECK(!t || t->device().is_cpu(), kName, ": expected every tensor on the CPU, but got one on ",
               t->device().str());
}

double DefaultScale(const Tensor& q, std::optional<double> scale) {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
}

// A tensor laid out as `m` says, in the accumulation type `acc`, zeroed when `zero`.
Tensor EmptyAs(TensorMeta m, ScalarType acc, bool zero) {
  m.dtype = acc;
  Tensor t = EmptyFromMeta(m);
  if (zero && t.numel() > 0) std::memset(t.data_ptr<char>(), 0, t.numel() * t->itemsize());  // dense: numel elements
  return t;
}

std::array<int64_t, 3> Strides3(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

Tensor2 FlashForwardCPU(const Tensor& q, const Tensor& k, const Tensor& v, double dropout_p, bool is_causal,
                        const OptTensor& mask, std::optional<double> scale) {
  auto [out_meta, lse_meta] = FlashForwardMeta(q, k, v, dropout_p, is_causal, mask, scale);
  CheckOnCpu({&q, &k, &v, Defined(mask) ? &*mask : nullptr});
  const ScalarType acc = AccType(q.dtype());
  Tensor out = EmptyAs(out_meta, acc, false), lse = EmptyFromMeta(lse_meta);
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), E = q.size(3), Hk = k.size(1), S = k.size(2);
  auto run = [&](auto zero) {
    using A = decltype(zero);
    Operand<A> qa(q, acc), ka(k, acc), va(v, acc);
    Mask<A> m(mask, B, H, L, S, acc);
    const auto os = Strides3(out);
    FlashForward<A>(qa, ka, va, m, is_causal, static_cast<A>(DefaultScale(q, scale)), B, H, Hk, L, S, E,
                    out.data_ptr<A>(), os.data(), lse.data_ptr<A>());
  };
  if (acc == ScalarType::Float64) run(0.0);
  else run(0.0f);
  return {acc == q.dtype() ? out : ops::to_dtype(out, q.dtype()), lse};
}

Tensor3 FlashBackwardCPU(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                         const Tensor& lse, double dropout_p, bool is_causal, const OptTensor& mask,
                         std::optional<double> scale) {
  auto [dq_meta, dk_meta, dv_meta] = FlashBackwardMeta(grad_out, q, k, v, out, lse, dropout_p, is_causal, mask, scale);
  CheckOnCpu({&grad_out, &q, &k, &v, &out, &lse, Defined(mask) ? &*mask : nullptr});
  const ScalarType acc = AccType(q.dtype());
  Tensor dq = EmptyAs(dq_meta, acc, true), dk = EmptyAs(dk_meta, acc, true), dv = EmptyAs(dv_meta, acc, true);
  const int64_t B = q.size(0), H = q.size(1), L = q.size(2), E = q.size(3), Hk = k.size(1), S = k.size(2);
  auto run = [&](auto zero) {
    using A = decltype(zero);
    Operand<A> ga(grad_out, acc), qa(q, acc), ka(k, acc), va(v, acc), oa(out, acc);
    Mask<A> m(mask, B, H, L, S, acc);
    // lse as [B, L, H] memory, whatever layout it came in
    Tensor lse_blh = ops::contiguous(ops::permute(lse, {0, 2, 1}));
    const auto dqs = Strides3(dq), dks = Strides3(dk), dvs = Strides3(dv);
    FlashBackward<A>(ga, qa, ka, va, oa, lse_blh.data_ptr<const A>(), m, is_causal,
                     static_cast<A>(DefaultScale(q, scale)), B, H, Hk, L, S, E, dq.data_ptr<A>(),
                     dqs.data(), dk.data_ptr<A>(), dks.data(), dv.data_ptr<A>(),
                     dvs.data());
  };
  if (acc == ScalarType::Float64) run(0.0);
  else run(0.0f);
  if (acc != q.dtype())
    return {ops::to_dtype(dq, q.dtype()), ops::to_dtype(dk, q.dtype()), ops::to_dtype(dv, q.dtype())};
  return {dq, dk, dv};
}

}  // namespace

void RegisterAttentionOps(Registry& r) {
  r.Def("_scaled_dot_product_flash_attention_for_cpu(Tensor query, Tensor key, Tensor value, float dropout_p=0., "
        "bool is_causal=False, *, Tensor? attn_mask=None, float? scale=None) -> (Tensor output, Tensor logsumexp)",
        {Tag::compute_intensive}, kFunction)
      .Impl<&FlashForwardCPU>(DispatchKey::CPU)
      .Meta<&FlashForwardMeta>();
  r.Def("_scaled_dot_product_flash_attention_for_cpu_backward(Tensor grad_out, Tensor query, Tensor key, "
        "Tensor value, Tensor out, Tensor logsumexp, float dropout_p, bool is_causal, *, Tensor? attn_mask=None, "
        "float? scale=None) -> (Tensor grad_query, Tensor grad_key, Tensor grad_value)",
        {Tag::compute_intensive}, kFunction)
      .Impl<&FlashBackwardCPU>(DispatchKey::CPU)
      .Meta<&FlashBackwardMeta>();
}

}  // namespace kiln
