// tensor/ops/lapack_cuda.cc: the factorizations on CUDA (lapack_cuda.h). Every routine runs one
// matrix of the batch at a time from its column-major storage (matrix b at b * rows * cols), its
// workspace from one growing scratch tensor; results that are not a routine's own output (R's
// triangle, a wide SVD's transposes, determinants) are made with CUDA ops.
#include "tensor/ops/lapack_cuda.h"

#include <algorithm>
#include <cmath>

#include "runtime/cuda/cusolver.h"
#include "runtime/cuda/stream.h"
#include "tensor/empty.h"
#include "tensor/ops/common.h"

namespace kiln {
namespace {

// The device workspace cuSOLVER asks for: one uint8 tensor, grown on demand. A smaller one freed
// while routines still use it is safe: the caching allocator reuses it only on the same stream.
struct Scratch {
  Device device;
  Tensor buffer;
  void* Get(size_t bytes) {
    if (!buffer.defined() || static_cast<size_t>(buffer.numel()) < bytes)
      buffer = EmptyTensor(DimVector{static_cast<int64_t>(bytes)}, ScalarType::UInt8, device);
    return buffer.raw_data();
  }
};

// A solver call on `t`'s device and current stream, and what it needs alive.
struct Solver {
  explicit Solver(const Tensor& t)
      : scratch{t.device(), Tensor()},
        fn([this](size_t bytes) { return scratch.Get(bytes); }),
        stream(cuda::CurrentStream(t.device().index)),
        call{stream, t.dtype() == ScalarType::Float64, fn},
        element(ElementSize(t.dtype())) {}
  Scratch scratch;
  cuda::SolverScratch fn;
  cuda::Stream stream;
  cuda::SolverCall call;
  size_t element;
};

int64_t BatchOf(const Tensor& t) {
  int64_t n = 1;
  for (int64_t d = 0; d + 2 < t.dim(); ++d) n *= t.size(d);
  return n;
}
char* At(const Tensor& t, int64_t b, int64_t per, size_t element) {
  return static_cast<char*>(t.raw_data()) + static_cast<size_t>(b * per) * element;
}
int32_t* IntAt(const Tensor& t, int64_t b, int64_t per) { return t.data_ptr<int32_t>() + b * per; }
int Ld(int64_t rows) { return static_cast<int>(std::max<int64_t>(rows, 1)); }

// A device int for the `info` of routines whose failures cannot happen (getrs, orgqr).
Tensor InfoSink(const Tensor& like) { return EmptyTensor(DimVector{1}, ScalarType::Int32, like.device()); }

// Matrix b's `info` values on the host (one synchronisation).
std::vector<int32_t> HostInfo(const Tensor& info) {
  const Tensor host = CopyToDevice(ops::contiguous(info), Device());
  return std::vector<int32_t>(host.data_ptr<int32_t>(), host.data_ptr<int32_t>() + host.numel());
}
std::string Prefix(const Tensor& a, int64_t b) { return a.dim() > 2 ? StrCat("(Batch element ", b, "): ") : ""; }
[[noreturn]] void LinAlgError(const std::string& msg) { throw NamedError("kiln.linalg", "LinAlgError", msg); }

// The identity's columns as a column-major batch shaped like `like` (square, or [m, cols]).
void FillIdentity(const Tensor& out) {
  Tensor o = out;
  const int64_t rows = out.size(-2), cols = out.size(-1);
  const Tensor eye = CallOp<Tensor>(KILN_OP("aten::eye.m"), SymInt(rows), SymInt(cols),
                                    std::optional<ScalarType>(out.dtype()), std::optional<Layout>(),
                                    std::optional<Device>(out.device()), std::optional<bool>());
  const DimVector sizes = out.sizes();
  ops::copy_(o, ops::expand(eye, std::vector<SymInt>(sizes.begin(), sizes.end())));
}


}  // namespace

void LuInPlaceCUDA(const Tensor& lu, const Tensor& pivots, const Tensor& info) {
  Tensor i = info;
  ops::fill_(i, Scalar(int64_t{0}));
  const int64_t m = lu.size(-2), n = lu.size(-1), k = std::min(m, n), count = BatchOf(lu);
  if (m == 0 || n == 0) return;
  Solver s(lu);
  for (int64_t b = 0; b < count; ++b)
    cuda::Getrf(s.call, static_cast<int>(m), static_cast<int>(n), At(lu, b, m * n, s.element), Ld(m),
                IntAt(pivots, b, k), IntAt(info, b, 1));
}

Tensor InvertLuCUDA(const Tensor& lu, const Tensor& pivots) {
  const int64_t n = lu.size(-1), count = BatchOf(lu);
  // the identity (the same in either layout), solved in place column-major, then viewed as lu is
  Tensor inv = EmptyTensor(DimVector{count, n, n}, lu.dtype(), lu.device());
  FillIdentity(inv);
  if (n > 0) {
    Solver s(lu);
    const Tensor sink = InfoSink(lu);
    for (int64_t b = 0; b < count; ++b)
      cuda::Getrs(s.call, false, static_cast<int>(n), static_cast<int>(n), At(lu, b, n * n, s.element), Ld(n),
                  IntAt(pivots, b, n), At(inv, b, n * n, s.element), Ld(n), IntAt(sink, 0, 0));
  }
  const DimVector sizes = lu.sizes();
  return ops::view(ops::transpose(inv, 1, 2), std::vector<SymInt>(sizes.begin(), sizes.end()));
}

std::tuple<Tensor, Tensor, Tensor> DetFromLuCUDA(const Tensor& lu, const Tensor& pivots) {
  const int64_t n = lu.size(-1);
  const Tensor diag = CallOp<Tensor>(KILN_OP("aten::diagonal"), lu, int64_t{0}, int64_t{-2}, int64_t{-1});
  auto prod = [](const Tensor& t) {
    return CallOp<Tensor>(KILN_OP("aten::prod.dim_int"), t, int64_t{-1}, false, std::optional<ScalarType>());
  };
  // (-1)^(the number of rows the pivots swapped)
  const Tensor steps = CallOp<Tensor>(KILN_OP("aten::arange.start_step"), Scalar(int64_t{1}), Scalar(n + 1),
                                      Scalar(int64_t{1}), std::optional<ScalarType>(ScalarType::Int32),
                                      std::optional<Layout>(), std::optional<Device>(lu.device()), std::optional<bool>());
  const Tensor swaps = ops::sum(CallOp<Tensor>(KILN_OP("aten::ne.Tensor"), pivots, steps), ops::IntList{-1});
  const Tensor odd = CallOp<Tensor>(KILN_OP("aten::remainder.Scalar"), swaps, Scalar(int64_t{2}));
  const Tensor parity = ops::to_dtype(ops::add(ops::mul(odd, Scalar(int64_t{-2})), Scalar(int64_t{1})), lu.dtype());
  const Tensor det = ops::mul(parity, prod(diag));
  const Tensor logabs = ops::sum(CallOp<Tensor>(KILN_OP("aten::log"), CallOp<Tensor>(KILN_OP("aten::abs"), diag)), ops::IntList{-1});
  const Tensor singular = CallOp<Tensor>(KILN_OP("aten::eq.Scalar"), logabs, Scalar(-INFINITY));
  const Tensor sign = ops::where(singular, ops::zeros_like(det), ops::mul(parity, prod(CallOp<Tensor>(KILN_OP("aten::sign"), diag))));
  return {det, sign, logabs};
}

void SolveWithLuCUDA(const Tensor& lu, const Tensor& pivots, const Tensor& x, bool transpose) {
  const int64_t n = lu.size(-1), k = x.size(-1), count = BatchOf(lu);
  if (n == 0 || k == 0) return;
  Solver s(lu);
  const Tensor sink = InfoSink(lu);
  for (int64_t b = 0; b < count; ++b)
    cuda::Getrs(s.call, transpose, static_cast<int>(n), static_cast<int>(k), At(lu, b, n * n, s.element), Ld(n),
                IntAt(pivots, b, n), At(x, b, n * k, s.element), Ld(n), IntAt(sink, 0, 0));
}

void CholeskyInPlaceCUDA(const Tensor& l, const Tensor& info, bool upper) {
  Tensor i = info;
  ops::fill_(i, Scalar(int64_t{0}));
  const int64_t n = l.size(-1), count = BatchOf(l);
  if (n == 0) return;
  Solver s(l);
  for (int64_t b = 0; b < count; ++b)
    cuda::Potrf(s.call, upper, static_cast<int>(n), At(l, b, n * n, s.element), Ld(n), IntAt(info, b, 1));
  // potrf leaves A's values in the other triangle
  if (upper) CallOp<Tensor>(KILN_OP("aten::triu_"), l, int64_t{0});
  else CallOp<Tensor>(KILN_OP("aten::tril_"), l, int64_t{0});
}

void QrCUDA(const Tensor& factors, const Tensor& q, const Tensor& r, bool compute_q) {
  const int64_t m = factors.size(-2), n = factors.size(-1), k = std::min(m, n), count = BatchOf(factors);
  const int64_t r_rows = r.size(-2), q_cols = compute_q ? q.size(-1) : 0, width = std::max(n, q_cols);
  // each matrix column-major with room for Q's columns: [count, width, m] row-major
  Tensor work = ops::full({SymInt(count), SymInt(width), SymInt(m)}, Scalar(0.0), factors.dtype(), factors.device());
  Tensor a_part = ops::slice(work, 1, 0, n);
  ops::copy_(a_part, ops::transpose(ops::reshape(factors, {SymInt(count), SymInt(m), SymInt(n)}), 1, 2));
  Tensor tau = EmptyTensor(DimVector{count, std::max<int64_t>(k, 1)}, factors.dtype(), factors.device());
  Solver s(factors);
  const Tensor sink = InfoSink(factors);
  if (k > 0) {
    for (int64_t b = 0; b < count; ++b)
      cuda::Geqrf(s.call, static_cast<int>(m), static_cast<int>(n), At(work, b, width * m, s.element), Ld(m),
                  At(tau, b, std::max<int64_t>(k, 1), s.element), IntAt(sink, 0, 0));
  }
  // R: the upper triangle of the first r_rows rows
  Tensor rr = r;
  const DimVector r_sizes = r.sizes();
  const Tensor upper = CallOp<Tensor>(KILN_OP("aten::triu"), ops::slice(ops::transpose(a_part, 1, 2), 1, 0, r_rows),
                                      int64_t{0});
  if (rr.numel() > 0) ops::copy_(rr, ops::reshape(upper, std::vector<SymInt>(r_sizes.begin(), r_sizes.end())));
  if (!compute_q || q.numel() == 0) return;
  Tensor qq = q;
  if (k == 0) return FillIdentity(qq);  // no reflectors: Q's columns are the identity's
  for (int64_t b = 0; b < count; ++b)
    cuda::Orgqr(s.call, static_cast<int>(m), static_cast<int>(q_cols), static_cast<int>(k),
                At(work, b, width * m, s.element), Ld(m), At(tau, b, std::max<int64_t>(k, 1), s.element),
                IntAt(sink, 0, 0));
  const DimVector q_sizes = q.sizes();
  ops::copy_(qq, ops::reshape(ops::transpose(ops::slice(work, 1, 0, q_cols), 1, 2),
                              std::vector<SymInt>(q_sizes.begin(), q_sizes.end())));
}

void SvdCUDA(const Tensor& src, const Tensor& u, const Tensor& sv, const Tensor& vh, bool full, bool compute_uv) {
  const int64_t m = src.size(-2), n = src.size(-1), k = std::min(m, n), count = BatchOf(src);
  if (count == 0) return;
  // PyTorch's error for non-finite input, naming the first such matrix (one synchronisation)
  const Tensor finite = ops::reshape(CallOp<Tensor>(KILN_OP("aten::isfinite"), src), {SymInt(count), SymInt(m * n)});
  const Tensor all_finite = CallOp<Tensor>(KILN_OP("aten::all.dim"), finite, int64_t{1}, false);
  const std::vector<int32_t> ok = HostInfo(ops::to_dtype(all_finite, ScalarType::Int32));
  for (int64_t b = 0; b < count; ++b) {
    if (!ok[b])
      LinAlgError(StrCat("linalg.svd: ", Prefix(src, b),
                         "The algorithm failed to converge because the input matrix contained non-finite values."));
  }
  if (k == 0) {  // nothing to factor; a full U or Vh of an empty matrix is the identity
    if (compute_uv && full) {
      FillIdentity(u);
      FillIdentity(vh);
    }
    return;
  }
  // gesvd takes m >= n; a wide A is done as A^T = U' S V'^T, so U = V' and Vh = U'^T
  const bool wide = m < n;
  const int64_t rows = wide ? n : m, cols = wide ? m : n;  // of the matrix factored
  // (a copy either way: gesvd destroys it) row-major A is column-major A^T
  const Tensor a = wide ? ops::contiguous(src) : src;
  const int64_t u_cols = !compute_uv ? 0 : (full ? rows : cols);
  Tensor uf = compute_uv ? EmptyTensor(DimVector{count, u_cols, rows}, src.dtype(), src.device()) : Tensor();
  Tensor vf = compute_uv ? EmptyTensor(DimVector{count, cols, cols}, src.dtype(), src.device()) : Tensor();
  Tensor s_out = sv.is_contiguous() ? sv : EmptyTensor(sv.sizes(), sv.dtype(), sv.device());
  Tensor info = EmptyTensor(DimVector{count}, ScalarType::Int32, src.device());
  Solver s(src);
  const char job = !compute_uv ? 'N' : full ? 'A' : 'S';
  for (int64_t b = 0; b < count; ++b) {
    cuda::Gesvd(s.call, job, job, static_cast<int>(rows), static_cast<int>(cols), At(a, b, m * n, s.element),
                Ld(rows), At(s_out, b, k, s.element), compute_uv ? At(uf, b, u_cols * rows, s.element) : nullptr,
                Ld(rows), compute_uv ? At(vf, b, cols * cols, s.element) : nullptr, Ld(cols), IntAt(info, b, 1));
  }
  const std::vector<int32_t> status = HostInfo(info);
  for (int64_t b = 0; b < count; ++b) {
    if (status[b] > 0)
      LinAlgError(StrCat("linalg.svd: ", Prefix(src, b), "The algorithm failed to converge because the input matrix is "
                         "ill-conditioned or has too many repeated singular values (error code: ", status[b], ")."));
  }
  if (!s_out.is_same(sv)) {
    Tensor o = sv;
    ops::copy_(o, s_out);
  }
  if (!compute_uv) return;
  // uf holds U' column-major ([count, u_cols, rows] row-major), vf V'^T column-major
  const Tensor u_factored = ops::transpose(uf, 1, 2);   // [count, rows, u_cols]
  const Tensor vt_factored = ops::transpose(vf, 1, 2);  // [count, cols, cols]
  const DimVector us = u.sizes(), vs = vh.sizes();
  const std::vector<SymInt> u_shape(us.begin(), us.end()), vh_shape(vs.begin(), vs.end());
  Tensor uo = u, vo = vh;
  if (wide) {  // U = V' = (V'^T)^T, Vh = U'^T
    ops::copy_(uo, ops::reshape(ops::transpose(vt_factored, 1, 2), u_shape));
    ops::copy_(vo, ops::reshape(ops::transpose(u_factored, 1, 2), vh_shape));
  } else {
    ops::copy_(uo, ops::reshape(u_factored, u_shape));
    ops::copy_(vo, ops::reshape(vt_factored, vh_shape));
  }
}

void EighCUDA(const Tensor& a, const Tensor& w, bool upper, bool compute_v) {
  const int64_t n = a.size(-1), count = BatchOf(a);
  if (n == 0 || count == 0) return;
  Tensor info = EmptyTensor(DimVector{count}, ScalarType::Int32, a.device());
  Solver s(a);
  for (int64_t b = 0; b < count; ++b)
    cuda::Syevd(s.call, compute_v, upper, static_cast<int>(n), At(a, b, n * n, s.element), Ld(n),
                At(w, b, n, s.element), IntAt(info, b, 1));
  const std::vector<int32_t> status = HostInfo(info);
  for (int64_t b = 0; b < count; ++b) {
    if (status[b] > 0)
      LinAlgError(StrCat("linalg.eigh: ", Prefix(a, b), "The algorithm failed to converge because the input matrix is "
                         "ill-conditioned or has too many repeated eigenvalues (error code: ", status[b], ")."));
  }
}

}  // namespace kiln
