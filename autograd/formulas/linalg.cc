// autograd/formulas/linalg.cc: derivatives of the matrix products.
#include "autograd/formulas/common.h"

namespace kiln::autograd {
using namespace formulas;

namespace {

// Whether a matrix is column-major (its transpose contiguous), as PyTorch's mm_mat1_backward asks;
// false where a stride or size is symbolic, so a dynamic trace records no guard for it.
// The layout is read from the sizes and strides the node kept ("mat1.strides"), not from the saved
// matrix: mat1 itself is saved only when mat2's gradient is wanted.
bool IsColumnMajor(const SymDimVector& sizes, const SymDimVector& strides) {
  if (sizes.size() != 2 || strides.size() != 2) return false;
  const auto s0 = strides[0].maybe_as_int(), s1 = strides[1].maybe_as_int();
  const auto n0 = sizes[0].maybe_as_int();
  return s0 && s1 && n0 && *s0 == 1 && *s1 == *n0;
}

// The gradients of mat1 @ mat2, each laid out as its matrix is, as PyTorch's mm_mat1_backward and
// mm_mat2_backward compute them: a column-major one's as the transpose of a contiguous product.
// nn.Linear multiplies by weight.t(), a column-major view, whose gradient then comes back
// contiguous through TBackward0 and is stolen into weight.grad; computed row-major, it came back
// transposed and AccumulateGrad copied it into the weight's layout (0.5 ms a step for a 1024x1024
// weight).
Tensor Mat1Grad(Ctx& c, const char* mat1, const char* mat2) {
  return IsColumnMajor(c.sizes(mat1), c.strides(mat1)) ? t(mm(c.input(mat2), t(c.grad())))
                                                       : mm(c.grad(), t(c.input(mat2)));
}
Tensor Mat2Grad(Ctx& c, const char* mat1, const char* mat2) {
  return IsColumnMajor(c.sizes(mat2), c.strides(mat2)) ? t(mm(t(c.grad()), c.input(mat1)))
                                                       : mm(t(c.input(mat1)), c.grad());
}

}  // namespace

void DefineLinalgFormulas(DerivativeTable& d) {
  // Each matrix is saved only for the other's gradient, as PyTorch saves them: `x[x > 0] = 1`
  // after `mm(x, w)` with a frozen w is no error there (fuzz seed 951, program 4040).
  d.Def("mm", {"self for mat2", "mat2 for self", "self.strides", "mat2.strides"}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = Mat1Grad(c, "self", "mat2");
    if (c.needs("mat2")) g["mat2"] = Mat2Grad(c, "self", "mat2");
  });
  d.Def("bmm", {"self for mat2", "mat2 for self"}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = ops::bmm(c.grad(), ops::transpose(c.input("mat2"), 1, 2));
    if (c.needs("mat2")) g["mat2"] = ops::bmm(ops::transpose(c.input("self"), 1, 2), c.grad());
  });
  d.Def("addmm", {"mat1 for mat2", "mat2 for mat1", "mat1.strides", "mat2.strides"}, [](Ctx& c, Grads& g) {
    Scalar beta = c.scalar("beta"), alpha = c.scalar("alpha");
    if (c.needs("self")) g["self"] = beta.to_double() == 1.0 ? c.grad() : mul(c.grad(), beta);
    if (c.needs("mat1")) {
      Tensor r = Mat1Grad(c, "mat1", "mat2");
      g["mat1"] = alpha.to_double() == 1.0 ? r : mul(r, alpha);
    }
    if (c.needs("mat2")) {
      Tensor r = Mat2Grad(c, "mat1", "mat2");
      g["mat2"] = alpha.to_double() == 1.0 ? r : mul(r, alpha);
    }
  });
  d.Def("baddbmm", {"batch1 for batch2", "batch2 for batch1"}, [](Ctx& c, Grads& g) {
    Scalar beta = c.scalar("beta"), alpha = c.scalar("alpha");
    if (c.needs("self")) g["self"] = mul(c.grad(), beta);
    if (c.needs("batch1")) g["batch1"] = mul(ops::bmm(c.grad(), ops::transpose(c.input("batch2"), 1, 2)), alpha);
    if (c.needs("batch2")) g["batch2"] = mul(ops::bmm(ops::transpose(c.input("batch1"), 1, 2), c.grad()), alpha);
  });
  d.Def("dot", {"self for tensor", "tensor for self"}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = mul(c.grad(), c.input("tensor"));
    if (c.needs("tensor")) g["tensor"] = mul(c.grad(), c.input("self"));
  });
}

}  // namespace kiln::autograd
