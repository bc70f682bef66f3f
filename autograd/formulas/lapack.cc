// autograd/formulas/lapack.cc: derivatives of the LAPACK factorizations (tensor/ops/lapack.cc):
// inverse, determinants, solve, Cholesky, QR, SVD and the symmetric eigendecomposition, for real
// matrices. Each formula is written with the ops it differentiates (solve, inverse, svd), so double
// backward records them too. Broadcast batch dims (solve's) are summed back by the engine.
#include <tuple>

#include "autograd/formulas/common.h"
#include "tensor/ops/common.h"

namespace kiln::autograd {
using namespace formulas;

namespace {

using Tensor2 = std::tuple<Tensor, Tensor>;
using Tensor3 = std::tuple<Tensor, Tensor, Tensor>;
using Tensor4 = std::tuple<Tensor, Tensor, Tensor, Tensor>;

Tensor mT(const Tensor& a) { return ops::transpose(a, -2, -1); }
Tensor matmul(const Tensor& a, const Tensor& b) { return ops::matmul(a, b); }
Tensor inverse(const Tensor& a) { return std::get<0>(CallOp<Tensor2>(KILN_OP("aten::linalg_inv_ex"), a, false)); }
// X with AX = B (left) or XA = B, B a matrix.
Tensor solve(const Tensor& a, const Tensor& b, bool left) {
  return std::get<0>(CallOp<Tensor4>(KILN_OP("aten::_linalg_solve_ex"), a, b, left, false));
}
Tensor det(const Tensor& a) { return std::get<0>(CallOp<Tensor3>(KILN_OP("aten::_linalg_det"), a)); }
Tensor eye(int64_t n, const Tensor& like) {
  return CallOp<Tensor>(KILN_OP("aten::eye"), SymInt(n), std::optional<ScalarType>(like.dtype()),
                        std::optional<Layout>(), std::optional<Device>(like.device()), std::optional<bool>());
}
Tensor unsq(const Tensor& a, int64_t d) { return ops::unsqueeze(a, d); }
Tensor skew(const Tensor& a) { return sub(a, mT(a)); }
Tensor tril(const Tensor& a, int64_t k = 0) { return ops::tril(a, k); }
Tensor flip_last(const Tensor& a) { return CallOp<Tensor>(KILN_OP("aten::flip"), a, IntList{-1}); }
Tensor pad_front_one(const Tensor& a) {  // [1, a_0, a_1, ...] along the last dim
  return CallOp<Tensor>(KILN_OP("aten::constant_pad_nd"), a, SymList{SymInt(1), SymInt(0)}, Scalar(1));
}

// Whether a determinant may be 0: always when there is no data to look at (tracing), so the
// traced backward handles singular matrices too.
bool MayBeSingular(const Tensor& d) {
  if (!d->has_storage()) return true;
  if (d.device().is_cuda())  // one synchronisation, as PyTorch's check on CUDA
    return d.numel() > 0 && ItemScalar("linalg.det", CallOp<Tensor>(KILN_OP("aten::any"), eq(d, Scalar(0)))).to_bool();
  Tensor values = ops::contiguous(ops::to_dtype(d, ScalarType::Float64));
  const double* p = values.data_ptr<double>();
  for (int64_t i = 0; i < values.numel(); ++i)
    if (p[i] == 0) return true;
  return false;
}

// Note [det backward]: d det(A) / dA = adj(A)^T, which is det(A) A^-T for an invertible A. For a
// singular A (det 0) that is 0 * inf; there adj(A)^T = det(U) det(Vh) U diag(prod_{j != i} s_j) Vh
// from the SVD A = U diag(s) Vh, which holds for every A. The SVD form is only computed when some
// determinant in the batch is 0 (or unknown, while tracing), as PyTorch does.
Tensor DetBackward(const Tensor& grad, const Tensor& a, const Tensor& d) {
  const int64_t n = a.size(-1);
  if (n == 0) return zeros_like(a);
  Tensor scale = unsq(unsq(mul(grad, d), -1), -1);
  Tensor invertible = mul(mT(inverse(a)), scale);
  if (!MayBeSingular(d)) return invertible;
  auto [u, s, vh] = CallOp<Tensor3>(KILN_OP("aten::_linalg_svd"), a, false, true, std::optional<std::string>());
  // prod_{j != i} s_j as (prod_{j < i} s_j) * (prod_{j > i} s_j), without dividing by s_i
  Tensor before = pad_front_one(narrow(cumprod(s, -1), -1, 0, n - 1));
  Tensor after = flip_last(pad_front_one(narrow(cumprod(flip_last(s), -1), -1, 0, n - 1)));
  Tensor others = mul(before, after);
  Tensor alpha = unsq(unsq(mul(mul(det(u), det(vh)), grad), -1), -1);
  Tensor singular = mul(matmul(mul(u, unsq(others, -2)), vh), alpha);
  return where(unsq(unsq(eq(d, Scalar(0)), -1), -1), singular, invertible);
}

// Whether solve's B was a (batch of) vector(s) for A (PyTorch's linalg_solve_is_vector_rhs).
bool VectorRhs(const SymDimVector& a, const SymDimVector& b) {
  if (b.size() == 1) return true;
  if (b.size() + 1 != a.size()) return false;
  for (size_t i = 0; i < b.size(); ++i)
    if (!(a[i] == b[i])) return false;
  return true;
}

// The gradient of A = QR for a square (k x k) R: with M = R gR^T - gQ^T Q,
// gA = (gQ + Q copyltu(M)) R^-T, where copyltu(M) mirrors M's lower triangle onto the upper one.
Tensor QrSquareBackward(const Tensor& gq, const Tensor& gr, const Tensor& q, const Tensor& r) {
  Tensor m = sub(matmul(r, mT(gr)), matmul(mT(gq), q));
  Tensor copyltu = add(tril(m), mT(tril(m, -1)));
  return solve(mT(r), add(gq, matmul(q, copyltu)), /*left=*/false);
}

}  // namespace

void DefineLapackFormulas(DerivativeTable& d) {
  d.Def("linalg_inv_ex", {"result"}, [](Ctx& c, Grads& g) {
    Tensor inv_t = mT(c.result());
    g["A"] = neg(matmul(matmul(inv_t, c.grad()), inv_t));
  });
  d.Def("_linalg_det", {"A", "result"}, [](Ctx& c, Grads& g) {
    g["A"] = DetBackward(c.grad(), c.input("A"), c.result());
  });
  d.Def("_linalg_slogdet", {"A"}, [](Ctx& c, Grads& g) {  // the sign of a real det has no gradient
    g["A"] = mul(mT(inverse(c.input("A"))), unsq(unsq(c.grad(1), -1), -1));
  });
  d.Def("_linalg_solve_ex", {"A", "result"}, [](Ctx& c, Grads& g) {
    // AX = B: gB = A^-T gX, gA = -gB X^T; XA = B: gB = gX A^-T, gA = -X^T gB
    const bool left = c.flag("left"), vector = VectorRhs(c.sizes("A"), c.sizes("B"));
    Tensor a = c.input("A"), x = c.result(), gx = c.grad();
    if (vector) x = unsq(x, -1), gx = unsq(gx, -1);
    Tensor gb = solve(mT(a), gx, left);
    if (c.needs("A")) g["A"] = neg(left ? matmul(gb, mT(x)) : matmul(mT(x), gb));
    if (c.needs("B")) g["B"] = vector ? ops::squeeze(gb, -1) : gb;
  });
  d.Def("linalg_cholesky_ex", {"result"}, [](Ctx& c, Grads& g) {
    // A = LL^T: gA = L^-T Phi(L^T gL) L^-1, Phi the lower triangle with the diagonal halved,
    // symmetrized (A is symmetric)
    const bool upper = c.flag("upper");
    Tensor l = upper ? mT(c.result()) : c.result(), gl = upper ? mT(c.grad()) : c.grad();
    Tensor m = matmul(mT(l), gl);
    Tensor phi = sub(tril(m), mul(ops::triu(tril(m), 0), Scalar(0.5)));
    Tensor l_inv = inverse(l);
    Tensor ga = matmul(matmul(mT(l_inv), phi), l_inv);
    g["self"] = mul(add(ga, mT(ga)), Scalar(0.5));
  });
  d.Def("linalg_qr", {"result0", "result1"}, [](Ctx& c, Grads& g) {
    const std::string mode = c.arg("mode").to_string();
    KILN_CHECK(mode != "r", "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please "
               "use linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.");
    Tensor q = c.result(0), r = c.result(1), gq = c.grad(0), gr = c.grad(1);
    const int64_t m = q.size(-2), n = r.size(-1);
    KILN_CHECK(mode == "reduced" || m <= n,
               "The QR decomposition is not differentiable when mode='complete' and nrows > ncols.");
    if (m >= n) {
      g["A"] = QrSquareBackward(gq, gr, q, r);
      return;
    }
    // A = [X | Y] with X = QU square and Y = QV: X's backward sees gQ + Y gV^T; gY = Q gV
    Tensor u = narrow(r, -1, 0, m), v = narrow(r, -1, m, n - m);
    Tensor gu = narrow(gr, -1, 0, m), gv = narrow(gr, -1, m, n - m);
    Tensor gx = QrSquareBackward(add(gq, matmul(matmul(q, v), mT(gv))), gu, q, u);
    g["A"] = CallOp<Tensor>(KILN_OP("aten::cat"), std::vector<Tensor>{gx, matmul(q, gv)}, int64_t{-1});
  });
  d.Def("_linalg_svd", {"result0", "result1", "result2"}, [](Ctx& c, Grads& g) {
    KILN_CHECK(c.flag("compute_uv"), "linalg.svd: Setting compute_uv=False in torch.linalg.svd and then "
               "differentiating the result is not supported; use linalg.svdvals, which computes the vectors "
               "when the input requires grad.");
    Tensor u = c.result(0), s = c.result(1), vh = c.result(2);
    const int64_t m = u.size(-2), n = vh.size(-1), k = s.size(-1);
    const bool full = c.flag("full_matrices");
    auto cut_u = [&](const Tensor& t) { return full ? narrow(t, -1, 0, k) : t; };   // U's first k columns
    auto cut_vh = [&](const Tensor& t) { return full ? narrow(t, -2, 0, k) : t; };  // Vh's first k rows
    u = cut_u(u), vh = cut_vh(vh);
    Tensor gs = c.grad(1);
    Tensor inner = mul(eye(k, s), unsq(gs, -2));  // diag(gS)
    if (!c.has_grad(0) && !c.has_grad(2)) {
      g["A"] = matmul(matmul(u, inner), vh);
      return;
    }
    // gA = U [skew(U^T gU)/E S + S skew(V^T gV)/E + diag(gS)] V^T
    //    + (I - UU^T) gU S^-1 V^T + U S^-1 gV^T (I - VV^T),   E_jk = s_k^2 - s_j^2 (1 on the diagonal)
    Tensor gu = cut_u(c.grad(0)), gv = mT(cut_vh(c.grad(2))), v = mT(vh);
    Tensor s2 = mul(s, s);
    Tensor e = add(sub(unsq(s2, -2), unsq(s2, -1)), eye(k, s));
    Tensor uhgu = matmul(mT(u), gu), vhgv = matmul(mT(v), gv);
    inner = add(inner, mul(div(skew(uhgu), e), unsq(s, -2)));
    inner = add(inner, mul(unsq(s, -1), div(skew(vhgv), e)));
    Tensor ga = matmul(matmul(u, inner), vh);
    if (m > k) ga = add(ga, matmul(div(sub(gu, matmul(u, uhgu)), unsq(s, -2)), vh));
    if (n > k) ga = add(ga, matmul(u, mT(div(sub(gv, matmul(v, vhgv)), unsq(s, -2)))));
    g["A"] = ga;
  });
  d.Def("_linalg_eigh", {"result0", "result1"}, [](Ctx& c, Grads& g) {
    // A = V diag(L) V^T with V orthogonal, so dV = V Omega, Omega skew with
    // Omega_ij = (V^T dA V)_ij / (l_j - l_i): gA = V (diag(gL) + F o skew(V^T gV) / 2) V^T,
    // F_ij = 1 / (l_j - l_i) off the diagonal (symmetric, as A is)
    KILN_CHECK(c.flag("compute_v"), "linalg.eigh: Setting compute_v=False and then differentiating the result is "
               "not supported; use linalg.eigvalsh, which computes the vectors when the input requires grad.");
    Tensor w = c.result(0), v = c.result(1);
    const int64_t n = w.size(-1);
    Tensor inner = mul(eye(n, w), unsq(c.grad(0), -2));
    if (c.has_grad(1)) {
      Tensor diff = add(sub(unsq(w, -2), unsq(w, -1)), eye(n, w));
      Tensor f = sub(reciprocal(diff), eye(n, w));
      inner = add(inner, mul(f, mul(skew(matmul(mT(v), c.grad(1))), Scalar(0.5))));
    }
    g["A"] = matmul(matmul(v, inner), mT(v));
  });
}

}  // namespace kiln::autograd
