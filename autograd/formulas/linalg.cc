// autograd/formulas/linalg.cc: derivatives of the matrix products.
#include "autograd/formulas/common.h"

namespace kiln::autograd {
using namespace formulas;

void DefineLinalgFormulas(DerivativeTable& d) {
  d.Def("mm", {"self", "mat2"}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = mm(c.grad(), t(c.input("mat2")));
    if (c.needs("mat2")) g["mat2"] = mm(t(c.input("self")), c.grad());
  });
  d.Def("bmm", {"self", "mat2"}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = ops::bmm(c.grad(), ops::transpose(c.input("mat2"), 1, 2));
    if (c.needs("mat2")) g["mat2"] = ops::bmm(ops::transpose(c.input("self"), 1, 2), c.grad());
  });
  d.Def("addmm", {"mat1", "mat2"}, [](Ctx& c, Grads& g) {
    Scalar beta = c.scalar("beta"), alpha = c.scalar("alpha");
    if (c.needs("self")) g["self"] = beta.to_double() == 1.0 ? c.grad() : mul(c.grad(), beta);
    if (c.needs("mat1")) {
      Tensor r = mm(c.grad(), t(c.input("mat2")));
      g["mat1"] = alpha.to_double() == 1.0 ? r : mul(r, alpha);
    }
    if (c.needs("mat2")) {
      Tensor r = mm(t(c.input("mat1")), c.grad());
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
