// autograd/formulas/linalg.cc: derivatives of the matrix products.
#include "autograd/formulas/common.h"

namespace kiln::autograd {
using namespace formulas;

namespace {

// Whether a matrix is column-major (its transpose contiguous), as PyTorch's mm_mat1_backward asks;
// false where a stride or size is symbolic, so a dynamic trace records no guard for it.
bool IsColumnMajor(const Tensor& m) {
  if (m.dim() != 2) return false;
  const auto s0 = m->sym_strides()[0].maybe_as_int(), s1 = m->sym_strides()[1].maybe_as_int();
  const auto n0 = m->sym_sizes()[0].maybe_as_int();
  return s0 && s1 && n0 && *s0 == 1 && *s1 == *n0;
}

// The gradients of mat1 @ mat2, each laid out as its matrix is, as PyTorch's mm_mat1_backward and
// mm_mat2_backward compute them: a column-major one's as the transpose of a contiguous product.
// nn.Linear multiplies by weight.t(), a column-major view, whose gradient then comes back
// contiguous through TBackward0 and is stolen into weight.grad; computed row-major, it came back
// transposed and AccumulateGrad copied it into the weight's layout (0.5 ms a step for a 1024x1024
// weight).
Tensor Mat1Grad(const Tensor& grad, const Tensor& mat1, const Tensor& mat2) {
  return IsColumnMajor(mat1) ? t(mm(mat2, t(grad))) : mm(grad, t(mat2));
}
Tensor Mat2Grad(const Tensor& grad, const Tensor& mat1, const Tensor& mat2) {
  return IsColumnMajor(mat2) ? t(mm(t(grad), mat1)) : mm(t(mat1), grad);
}

}  // namespace

void DefineLinalgFormulas(DerivativeTable& d) {
  d.Def("mm", {"self", "mat2"}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = Mat1Grad(c.grad(), c.input("self"), c.input("mat2"));
    if (c.needs("mat2")) g["mat2"] = Mat2Grad(c.grad(), c.input("self"), c.input("mat2"));
  });
  d.Def("bmm", {"self", "mat2"}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = ops::bmm(c.grad(), ops::transpose(c.input("mat2"), 1, 2));
    if (c.needs("mat2")) g["mat2"] = ops::bmm(ops::transpose(c.input("self"), 1, 2), c.grad());
  });
  d.Def("addmm", {"mat1", "mat2"}, [](Ctx& c, Grads& g) {
    Scalar beta = c.scalar("beta"), alpha = c.scalar("alpha");
    if (c.needs("self")) g["self"] = beta.to_double() == 1.0 ? c.grad() : mul(c.grad(), beta);
    if (c.needs("mat1")) {
      Tensor r = Mat1Grad(c.grad(), c.input("mat1"), c.input("mat2"));
      g["mat1"] = alpha.to_double() == 1.0 ? r : mul(r, alpha);
    }
    if (c.needs("mat2")) {
      Tensor r = Mat2Grad(c.grad(), c.input("mat1"), c.input("mat2"));
      g["mat2"] = alpha.to_double() == 1.0 ? r : mul(r, alpha);
    }
  });
  d.Def("baddbmm", {"batch1", "batch2"}, [](Ctx& c, Grads& g) {
    Scalar beta = c.scalar("beta"), alpha = c.scalar("alpha");
    if (c.needs("self")) g["self"] = mul(c.grad(), beta);
    if (c.needs("batch1")) g["batch1"] = mul(ops::bmm(c.grad(), ops::transpose(c.input("batch2"), 1, 2)), alpha);
    if (c.needs("batch2")) g["batch2"] = mul(ops::bmm(ops::transpose(c.input("batch1"), 1, 2), c.grad()), alpha);
  });
  d.Def("dot", {"self", "tensor"}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = mul(c.grad(), c.input("tensor"));
    if (c.needs("tensor")) g["tensor"] = mul(c.grad(), c.input("self"));
  });
}

}  // namespace kiln::autograd
