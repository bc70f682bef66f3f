// autograd/formulas/spectral.cc: derivatives of the FFT primitives (tensor/ops/fft.cc), PyTorch's.
// A transform is linear, so each gradient is the adjoint transform of the incoming gradient:
// c2c's is c2c the other way; r2c's pads a onesided gradient with zeros to the full spectrum, runs
// the backward c2c and keeps the real part; c2r's is r2c of the gradient with the entries that
// stood for two (their mirror images) doubled. Each is written with the same ops, so double
// backward records them too.
#include "autograd/formulas/common.h"

namespace kiln::autograd {
using namespace formulas;

namespace {

Tensor C2C(const Tensor& x, const IntList& dims, int64_t normalization, bool forward) {
  return CallOp<Tensor>(KILN_OP("aten::_fft_c2c"), x, dims, normalization, forward);
}
Tensor R2C(const Tensor& x, const IntList& dims, int64_t normalization, bool onesided) {
  return CallOp<Tensor>(KILN_OP("aten::_fft_r2c"), x, dims, normalization, onesided);
}
Tensor Real(const Tensor& x) { return CallOp<Tensor>(KILN_OP("aten::real"), x); }

}  // namespace

void DefineSpectralFormulas(DerivativeTable& d) {
  d.Def("_fft_c2c", {}, [](Ctx& c, Grads& g) {
    g["self"] = C2C(c.grad(), c.ints("dim"), c.i64("normalization"), !c.flag("forward"));
  });
  d.Def("_fft_r2c", {}, [](Ctx& c, Grads& g) {
    IntList dims = c.ints("dim");
    const int64_t last = WrapDim(dims.back(), c.dim("self"));
    Tensor grad = c.grad();
    const SymInt full = c.sizes("self")[last];
    if (c.flag("onesided") && grad->sym_sizes()[last] != full) {
      SymDimVector sizes = grad->sym_sizes();
      sizes[last] = full;
      Tensor zeros = formulas::zeros(sizes, grad.dtype(), grad.device());
      grad = CallOp<Tensor>(KILN_OP("aten::slice_scatter"), zeros, grad, last, std::optional<SymInt>(0),
                            std::optional<SymInt>(grad->sym_sizes()[last]), SymInt(1));
    }
    g["self"] = Real(C2C(grad, dims, c.i64("normalization"), /*forward=*/false));
  });
  d.Def("_fft_c2r", {}, [](Ctx& c, Grads& g) {
    IntList dims = c.ints("dim");
    const int64_t last = WrapDim(dims.back(), c.dim("self"));
    Tensor gi = R2C(c.grad(), dims, c.i64("normalization"), /*onesided=*/true);
    // entries 1 .. n - half of the onesided spectrum stood for themselves and their mirror image
    const int64_t doubled = c.grad().size(last) - gi.size(last);
    if (doubled > 0) {
      const ScalarType real = ToRealValueType(gi.dtype());
      const int64_t half = gi.size(last);
      Tensor scale = ops::cat({ops::full({SymInt(1)}, 1.0, real, gi.device()),
                               ops::full({SymInt(doubled)}, 2.0, real, gi.device()),
                               ops::full({SymInt(half - 1 - doubled)}, 1.0, real, gi.device())}, 0);
      // scaled as (real, imag) pairs: a real factor on either device (CUDA has no complex kernels)
      std::vector<SymInt> shape(gi.dim() + 1, SymInt(1));
      shape[last] = SymInt(half);
      const Tensor pairs = CallOp<Tensor>(KILN_OP("aten::view_as_real"), gi);
      gi = CallOp<Tensor>(KILN_OP("aten::view_as_complex"), mul(pairs, ops::reshape(scale, shape)));
    }
    g["self"] = gi;
  });
}

}  // namespace kiln::autograd
