// codegen/llvm_math.cc: f32 exp, sigmoid, tanh, erf and gelu as LLVM IR arithmetic that vectorises.
#include "codegen/llvm_math.h"

#include <cmath>
#include <iterator>

#include "codegen/erf_polynomials.h"
#include "llvm/IR/Intrinsics.h"

namespace kiln::codegen {

namespace {
constexpr double kExpMagic = 12582912.0 + 127.0;  // 1.5 * 2^23, plus the exponent bias
}  // namespace

llvm::Value* VectorMath::F32(double v) { return llvm::ConstantFP::get(b_.getFloatTy(), v); }

llvm::Value* VectorMath::Intrinsic(llvm::Intrinsic::ID id, std::vector<llvm::Value*> args) {
  return b_.CreateIntrinsic(id, {args[0]->getType()}, args);
}

llvm::Value* VectorMath::Horner(llvm::Value* v, const std::vector<double>& coeffs) {
  llvm::Value* p = F32(coeffs.back());
  for (size_t i = coeffs.size() - 1; i-- > 0;) p = Intrinsic(llvm::Intrinsic::fmuladd, {p, v, F32(coeffs[i])});
  return p;
}

// Note [Inline expf]: exp for f32 as plain vector arithmetic, so it vectorises at the full
// width (16 lanes on AVX-512) with no call. Cephes' expf reduction (x = n ln2 + r, ln2 in two
// parts), e^r by a degree-6 polynomial (~1 ulp overall), times 2^n. A SiLU kernel's time goes
// to this arithmetic, so it is written for the fewest instructions:
//  - n = round(x log2e) comes from adding 1.5 * 2^23 + 127: the sum's rounding is the rounding,
//    and its low mantissa bits hold n + 127, the biased exponent of 2^n, which one shift moves
//    into place. There is no round or float-to-int instruction, and no poison for NaN: a NaN
//    input gives a NaN polynomial and the result stays NaN;
//  - e^-x (for sigmoid) negates the constants, not x: the negation folds into the FMAs;
//  - the reduction and polynomial are fused multiply-adds (llvm.fmuladd), the polynomial in
//    Horner's form. Estrin's form halves the dependency chain but costs two more instructions,
//    and an interleaved loop (Note [Vector width and interleaving]) already has four chains in
//    flight; Horner also takes fewer registers, which 16-lane bodies run out of.
llvm::Value* VectorMath::ExpF32Reduced(llvm::Value* x, bool negate, llvm::Value** t_out) {
  auto c = [&](double v) { return F32(v); };
  auto fma = [&](llvm::Value* a, llvm::Value* b, llvm::Value* d) {
    return Intrinsic(llvm::Intrinsic::fmuladd, {a, b, d});
  };
  double sign = negate ? -1.0 : 1.0;
  llvm::Value* magic = c(kExpMagic);
  llvm::Value* t = fma(x, c(sign * 1.44269504088896341), magic);
  llvm::Value* fx = b_.CreateFSub(t, magic);
  llvm::Value* r = fma(fx, c(-0.693359375), negate ? b_.CreateFNeg(x) : x);
  r = fma(fx, c(2.12194440e-4), r);
  // e^r = 1 + r + q0 r^2 + ... + q4 r^6, fitted here for relative error in e^r on
  // [-ln2/2, ln2/2] (3e-9, far under f32's half ulp of 6e-8; Cephes' degree 7 is more than
  // f32 needs).
  *t_out = t;
  return Horner(r, {1.0, 1.0, 0.499999935, 0.16666521, 0.0416683865, 0.00836867069, 0.00138144727});
}
// 2^n for n in [-126, 127] from ExpF32Reduced's rounding sum: its low bits, shifted into the
// exponent field (the higher bits shift out).
llvm::Value* VectorMath::Pow2F32(llvm::Value* t) {
  return b_.CreateBitCast(b_.CreateShl(b_.CreateBitCast(t, b_.getInt32Ty()), 23), b_.getFloatTy());
}
// 2^n for n in [-126, 127] as an integer.
llvm::Value* VectorMath::Pow2F32OfInt(llvm::Value* n) {
  return b_.CreateBitCast(b_.CreateShl(b_.CreateAdd(n, b_.getInt32(127)), 23), b_.getFloatTy());
}
// x clamped to [lo, hi]; NaN fails both comparisons and passes through.
llvm::Value* VectorMath::ClampKeepNaN(llvm::Value* x, llvm::Value* lo, llvm::Value* hi) {
  x = b_.CreateSelect(b_.CreateFCmpOGT(x, hi), hi, x);
  return b_.CreateSelect(b_.CreateFCmpOLT(x, lo), lo, x);
}
// Any x: clamped to [-104, 88.8] (NaN passes the comparisons), and 2^n applied in two halves
// so each stays normal: results overflow to inf and underflow through subnormals to 0.
llvm::Value* VectorMath::ExpF32(llvm::Value* x) {
  auto c = [&](double v) { return F32(v); };
  llvm::Value* t;
  llvm::Value* y = ExpF32Reduced(ClampKeepNaN(x, c(-104.0), c(88.8)), false, &t);
  llvm::Value* n = b_.CreateSub(b_.CreateBitCast(t, b_.getInt32Ty()),
                                b_.getInt32(static_cast<int32_t>(0x4B400000 + 127)));
  llvm::Value* n1 = b_.CreateAShr(n, 1);
  return b_.CreateFMul(b_.CreateFMul(y, Pow2F32OfInt(n1)), Pow2F32OfInt(b_.CreateSub(n, n1)));
}
llvm::Value* VectorMath::Exp(llvm::Value* x) {
  if (x->getType()->isFloatTy() && inline_exp_) return ExpF32(x);
  return Intrinsic(llvm::Intrinsic::exp, {x});
}

// sigmoid(x) = 1 / (1 + exp(-x)). For f32 (Note [Sigmoid's reciprocal]): a vector divide is
// the slowest instruction in a SiLU kernel (vdivps on 16 lanes issues about once per 16
// cycles), so the division may use a reciprocal estimate refined by one Newton step (arcp and
// afn: rcp14 and two FMAs on AVX-512, ~1 ulp). Its edges are exact, set by comparing x, not by
// clamping it (a clamp is two more vector instructions in a loop that is bound by them):
//  - below -87 the result is 0, as the exact one (under 1.7e-38) all but is. There e^-x
//    overflows (the inline exp's 2^n wraps, libmvec's is inf, and the refinement of an infinite
//    divisor is NaN); the select discards those lanes;
//  - above 25 ln 2 (e^-x < 2^-25) the result is 1, which 1 / (1 + e^-x) rounds to and the
//    estimate can miss by an ulp (the legacy rcpps of 8-lane loops gives 1 - 2^-24). Above 87
//    the inline exp's 2^n wraps too, discarded the same way.
// NaN fails both comparisons and propagates. f64 keeps exp and the exact division.
llvm::Value* VectorMath::Sigmoid(llvm::Value* x) {
  auto c = [&](double v) { return llvm::ConstantFP::get(x->getType(), v); };
  llvm::Value* one = c(1.0);
  llvm::Value* neg = b_.CreateFNeg(x);
  if (!x->getType()->isFloatTy()) return b_.CreateFDiv(one, b_.CreateFAdd(one, Exp(neg)));
  llvm::Value* e;
  if (inline_exp_) {
    llvm::Value* rounding;
    llvm::Value* y = ExpF32Reduced(x, /*negate=*/true, &rounding);
    e = b_.CreateFMul(y, Pow2F32(rounding));
  } else {
    e = Intrinsic(llvm::Intrinsic::exp, {neg});
  }
  llvm::Value* q = b_.CreateFDiv(one, b_.CreateFAdd(one, e));
  llvm::FastMathFlags fmf;
  fmf.setAllowReciprocal();
  fmf.setApproxFunc();
  fmf.setNoInfs();  // the estimate needs it; the lanes where it fails (x < -87) are discarded
  fmf.setAllowContract();
  llvm::cast<llvm::Instruction>(q)->setFastMathFlags(fmf);
  q = b_.CreateSelect(b_.CreateFCmpOGT(x, c(17.328679513998633)), one, q);
  return b_.CreateSelect(b_.CreateFCmpOLT(x, c(-87.0)), c(0.0), q);
}

// Note [Inline erff]: libm's erff is a call per element, which keeps a GELU kernel scalar, so
// f32 erf is arithmetic too, with polynomials fitted here (max 1.3 ulp against glibc's erf
// over a dense sweep). Both branches run and a select picks one, as vector code must:
//  - |x| < 0.921875: erf(x) = x + x q(x^2), q of degree 5 (relative error 1.5e-8). Writing it
//    as x + x q instead of x p keeps p's leading 1.128 out of the rounding;
//  - above: erf(x) = 1 - e^(-x^2) c(|x|), c(x) = e^(x^2) erfc(x) (smooth, unlike erfc itself)
//    of degree 8 in x - 2.4 (absolute error 4e-9), |x| clamped to 4 (erf rounds to 1 from
//    3.92). x^2 lies in [0.84, 16] there, so e^-x^2 needs no clamps (Note [Inline expf]).
// The sign is copied from x; NaN passes the clamp and propagates.
llvm::Value* VectorMath::ErfF32(llvm::Value* x) {
  auto c = [&](double v) { return F32(v); };
  auto fma = [&](llvm::Value* a, llvm::Value* b, llvm::Value* d) {
    return Intrinsic(llvm::Intrinsic::fmuladd, {a, b, d});
  };
  llvm::Value* a = Intrinsic(llvm::Intrinsic::fabs, {x});
  const std::vector<double> near_q(std::begin(kErfNear), std::end(kErfNear));
  const std::vector<double> far_c(std::begin(kErfFar), std::end(kErfFar));
  llvm::Value* near = fma(a, Horner(b_.CreateFMul(a, a), near_q), a);
  llvm::Value* hi = c(kErfFarClamp);
  llvm::Value* ac = b_.CreateSelect(b_.CreateFCmpOGT(a, hi), hi, a);
  llvm::Value* rounding;
  llvm::Value* y = ExpF32Reduced(b_.CreateFMul(ac, ac), /*negate=*/true, &rounding);
  llvm::Value* e = b_.CreateFMul(y, Pow2F32(rounding));
  llvm::Value* scaled = Horner(b_.CreateFSub(ac, c(kErfFarCentre)), far_c);
  llvm::Value* far = b_.CreateFSub(c(1.0), b_.CreateFMul(e, scaled));
  llvm::Value* r = b_.CreateSelect(b_.CreateFCmpOLT(a, c(kErfNearLimit)), near, far);
  return Intrinsic(llvm::Intrinsic::copysign, {r, x});
}

// Note [Gelu's erf]: eager's gelu and gelu_backward (ErfF in tensor/vec_math.h) take erf in f32
// from Abramowitz and Stegun 7.1.26, as PyTorch's vectorized kernels do: absolute error up to
// 1.5e-7, so erf rounds to exactly +-1 above about 4 and gelu(-6.) is 0. Inductor's gelu must
// round as they do, not by the accurate ErfF32: a negative x's gelu keeps only that absolute
// precision, and fmod(x, gelu(x)) magnified the two erfs' difference to 1.4e-4 (fuzz seed 291,
// program 10318). The same operations in the same order, fused where eager calls std::fma
// (llvm.fma, not fmuladd, so the rounding does not depend on the target).
llvm::Value* VectorMath::ErfAbramowitzStegunF32(llvm::Value* x) {
  auto c = [&](double v) { return F32(v); };
  auto fma = [&](llvm::Value* a, llvm::Value* b, llvm::Value* d) { return Intrinsic(llvm::Intrinsic::fma, {a, b, d}); };
  llvm::Value* a = Intrinsic(llvm::Intrinsic::fabs, {x});
  llvm::Value* t = b_.CreateFDiv(c(1.0), fma(c(0.3275911), a, c(1.0)));
  llvm::Value* r = fma(c(1.061405429), t, c(-1.453152027));
  r = fma(r, t, c(1.421413741));
  r = fma(r, t, c(-0.284496736));
  r = fma(r, t, c(0.254829592));
  llvm::Value* e = Exp(b_.CreateFNeg(b_.CreateFMul(x, x)));
  llvm::Value* y = fma(b_.CreateFMul(b_.CreateFNeg(e), t), r, c(1.0));
  return Intrinsic(llvm::Intrinsic::copysign, {y, x});
}
// 0.5 * fma(x, erf(x / sqrt 2), x): +0. where x * cdf would be -0., as eager's float kernel.
llvm::Value* VectorMath::GeluF32(llvm::Value* x) {
  llvm::Value* erf = ErfAbramowitzStegunF32(b_.CreateFMul(x, F32(M_SQRT1_2)));
  return b_.CreateFMul(F32(0.5), Intrinsic(llvm::Intrinsic::fma, {x, erf, x}));
}
llvm::Value* VectorMath::NormalCdfF32(llvm::Value* x) {
  llvm::Value* erf = ErfAbramowitzStegunF32(b_.CreateFMul(x, F32(M_SQRT1_2)));
  return b_.CreateFMul(F32(0.5), b_.CreateFAdd(F32(1.0), erf));
}

// tanh for f32 computed in f64 and rounded once: eager's TanhF (tensor/vec_math.h, Note [tanhf
// in double]) operation for operation, multiply-adds as llvm.fma, so compiled and eager tanh
// agree bit for bit, both correctly rounded.
llvm::Value* VectorMath::TanhF32(llvm::Value* x) {
  llvm::Type* f64 = b_.getDoubleTy();
  auto c = [&](double v) { return llvm::ConstantFP::get(f64, v); };
  auto fma = [&](llvm::Value* a, llvm::Value* b, llvm::Value* d) { return Intrinsic(llvm::Intrinsic::fma, {a, b, d}); };
  llvm::Value* a = Intrinsic(llvm::Intrinsic::fabs, {b_.CreateFPExt(x, f64)});
  a = b_.CreateSelect(b_.CreateFCmpOGT(a, c(10.0)), c(10.0), a);  // NaN fails and stays NaN
  llvm::Value* z = b_.CreateFMul(a, a);
  llvm::Value* p = fma(fma(c(-9.64399179425052238628e-1), z, c(-9.92877231001918586564e1)), z,
                       c(-1.61468768441708447952e3));
  llvm::Value* q = fma(fma(b_.CreateFAdd(z, c(1.12811678491632931402e2)), z, c(2.23548839060100448583e3)), z,
                       c(4.84406305325125486048e3));
  llvm::Value* small = fma(b_.CreateFMul(a, z), b_.CreateFDiv(p, q), a);
  // e^2a as ExpForTanhD: reduction by ln2, Cephes' rational e^r, 2^n from the rounding sum's bits
  llvm::Value* y = b_.CreateFMul(c(2.0), a);
  llvm::Value* round = c(6755399441055744.0);  // 1.5 * 2^52
  llvm::Value* t = fma(y, c(1.4426950408889634), round);
  llvm::Value* n = b_.CreateFSub(t, round);
  llvm::Value* neg_n = b_.CreateFNeg(n);
  llvm::Value* r = fma(neg_n, c(6.93145751953125e-1), y);
  r = fma(neg_n, c(1.42860682030941723212e-6), r);
  llvm::Value* rr = b_.CreateFMul(r, r);
  llvm::Value* px = b_.CreateFMul(r, fma(fma(c(1.26177193074810590878e-4), rr, c(3.02994407707441961300e-2)), rr,
                                         c(9.99999999999999999910e-1)));
  llvm::Value* qx = fma(fma(fma(c(3.00198505138664455042e-6), rr, c(2.52448340349684104192e-3)), rr,
                            c(2.27265548208155028766e-1)), rr, c(2.00000000000000000009e0));
  llvm::Value* e = fma(c(2.0), b_.CreateFDiv(px, b_.CreateFSub(qx, px)), c(1.0));
  llvm::Value* t_bits = b_.CreateBitCast(t, b_.getInt64Ty());
  llvm::Value* scale = b_.CreateBitCast(b_.CreateShl(b_.CreateAdd(t_bits, b_.getInt64(1023)), 52), f64);
  llvm::Value* exp2a = b_.CreateFMul(e, scale);
  llvm::Value* large = b_.CreateFSub(c(1.0), b_.CreateFDiv(c(2.0), b_.CreateFAdd(exp2a, c(1.0))));
  llvm::Value* rounded = b_.CreateFPTrunc(b_.CreateSelect(b_.CreateFCmpOLT(a, c(0.625)), small, large), b_.getFloatTy());
  return Intrinsic(llvm::Intrinsic::copysign, {rounded, x});
}


}  // namespace kiln::codegen
