// autograd/formulas/index.cc: derivatives of joining, splitting, gathering, scattering, masking
// and reordering ops.
#include "autograd/formulas/common.h"

namespace kiln::autograd {
using namespace formulas;

namespace {
// Gradient of a Tensor[]-returning view (split, chunk): its pieces, zeros where none flowed, joined.
void JoinPieces(Ctx& c, Grads& g, int64_t dim) {
  std::vector<Tensor> pieces;
  for (size_t i = 0; i < c.node().input_meta().size(); ++i) pieces.push_back(c.grad(i));
  g["self"] = ops::cat(pieces, c.dim("self") == 0 ? 0 : WrapDim(dim, c.dim("self")));
}

// The index tensors, saved as PyTorch saves them: changed in place before the backward, they raise.
OptionalTensorList IndicesArg(Ctx& c) { return c.input_list("indices"); }

// index_select / gather along dim of x: the gradient adds back at the same indices.
Tensor IndexAddInto(const Tensor& grad, const SymDimVector& sizes, int64_t dim, const Tensor& index) {
  Tensor z = zeros(sizes, grad.dtype(), grad.device());
  if (sizes.empty()) return add(z, reshape(grad, {}));
  OptionalTensorList idx(dim + 1);
  idx[dim] = index;
  return CallOp<Tensor>(KILN_OP("aten::index_put"), z, idx, grad, true);
}
}  // namespace

void DefineIndexFormulas(DerivativeTable& d) {
  d.Def("cat", {}, [](Ctx& c, Grads& g) {
    size_t n = c.list_size("tensors");
    const OpBackward& node = c.node();
    auto [first, count] = node.arg_edges[0];
    int64_t out_dim = c.grad().dim();
    int64_t dim = WrapDim(c.i64("dim"), out_dim);
    TensorList& out = g.list("tensors");
    out.resize(n);
    SymInt offset = 0;
    for (size_t i = 0; i < n; ++i) {
      const SymDimVector& s = node.arg_meta[first + i].sizes;
      // Legacy 1-D empty inputs take no part in cat; their gradient is empty, not absent (a
      // gradient still reaches what they were computed from, zero, as in PyTorch).
      if (s.size() == 1 && s[0] == SymInt(0) && out_dim != 1) {
        if (node.next_edges()[first + i].valid())
          out[i] = zeros(s, node.arg_meta[first + i].dtype, c.grad().device());
        continue;
      }
      SymInt len = s[dim];
      if (node.next_edges()[first + i].valid()) out[i] = ops::slice(c.grad(), dim, offset, offset + len);
      offset = offset + len;
    }
    (void)count;
  });
  d.Def("stack", {}, [](Ctx& c, Grads& g) {
    size_t n = c.list_size("tensors");
    int64_t dim = WrapDim(c.i64("dim"), c.grad().dim());
    TensorList& out = g.list("tensors");
    for (size_t i = 0; i < n; ++i) out.push_back(ops::select(c.grad(), dim, static_cast<int64_t>(i)));
  });
  for (const char* name : {"split.Tensor", "split.sizes", "split_with_sizes"})
    d.Def(name, {}, [](Ctx& c, Grads& g) { JoinPieces(c, g, c.i64("dim")); });
  d.Def("unbind.int", {}, [](Ctx& c, Grads& g) {  // the slices' gradients stacked (zeros for unused ones)
    std::vector<Tensor> slices;
    for (size_t i = 0; i < c.node().input_meta().size(); ++i) slices.push_back(c.grad(i));
    g["self"] = ops::stack(slices, WrapDim(c.i64("dim"), c.dim("self")));
  });
  // PyTorch's formula names self (for its sizes), so eager saves it and an in-place change to self
  // before the backward raises there (fuzz seed 171, program 1875)
  d.Def("gather", {"index", "self"}, [](Ctx& c, Grads& g) {
    (void)c.input("self");
    Tensor z = zeros(c.sizes("self"), c.grad().dtype(), c.grad().device());
    g["self"] = CallOp<Tensor>(KILN_OP("aten::scatter_add"), z, c.i64("dim"), c.input("index"), c.grad());
  });
  d.Def("scatter.src", {"index"}, [](Ctx& c, Grads& g) {
    Tensor index = c.input("index");
    int64_t dim = c.i64("dim");
    if (c.needs("self")) g["self"] = CallOp<Tensor>(KILN_OP("aten::scatter.value"), c.grad(), dim, index, Scalar(0));
    if (c.needs("src")) g["src"] = ops::gather(c.grad(), dim, index);
  });
  d.Def("scatter.value", {"index"}, [](Ctx& c, Grads& g) {
    g["self"] = CallOp<Tensor>(KILN_OP("aten::scatter.value"), c.grad(), c.i64("dim"), c.input("index"), Scalar(0));
  });
  d.Def("scatter_add", {"index"}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = c.grad();
    if (c.needs("src")) g["src"] = ops::gather(c.grad(), c.i64("dim"), c.input("index"));
  });
  // source is saved, as PyTorch's formula reads it (its dim): changed in place before a backward
  // that needs its gradient, it raises PyTorch's version error (fuzz seed 381, program 13061)
  d.Def("index_add", {"index", "source"}, [](Ctx& c, Grads& g) {
    if (c.needs("self")) g["self"] = c.grad();
    if (!c.needs("source")) return;
    // source has self's dims (a 0-d source only with a 0-d self), so the rows it added to are
    // exactly its gradient's shape.
    const bool scalar = c.input("source").dim() == 0;
    const int64_t dim = scalar ? 0 : WrapDim(c.i64("dim"), c.dim("self"));
    Tensor picked = ops::index_select(c.grad(), dim, c.input("index"));
    if (scalar) picked = reshape(picked, {});
    const Scalar alpha = c.scalar("alpha");
    g["source"] = alpha.to_double() == 1.0 && !alpha.is_bool() ? picked : mul(picked, alpha);
  });
  d.Def("index_select", {"index"}, [](Ctx& c, Grads& g) {
    int64_t dim = c.dim("self") == 0 ? 0 : WrapDim(c.i64("dim"), c.dim("self"));
    g["self"] = IndexAddInto(c.grad(), c.sizes("self"), dim, c.input("index"));
  });
  d.Def("index.Tensor", {"indices"}, [](Ctx& c, Grads& g) {
    Tensor z = zeros(c.sizes("self"), c.grad().dtype(), c.grad().device());
    g["self"] = CallOp<Tensor>(KILN_OP("aten::index_put"), z, IndicesArg(c), c.grad(), true);
  });
  d.Def("index_put", {"indices"}, [](Ctx& c, Grads& g) {
    OptionalTensorList idx = IndicesArg(c);
    if (c.needs("self"))
      g["self"] = c.flag("accumulate") ? c.grad()
                                       : CallOp<Tensor>(KILN_OP("aten::index_put"), c.grad(), idx,
                                                        ops::scalar_tensor(0, c.grad().dtype()), false);
    if (c.needs("values")) g["values"] = ops::index(c.grad(), idx);
  });
  d.Def("masked_fill.Scalar", {"mask"}, [](Ctx& c, Grads& g) {
    g["self"] = masked_fill(c.grad(), c.input("mask"), 0);
  });
  d.Def("masked_fill.Tensor", {"mask"}, [](Ctx& c, Grads& g) {
    Tensor mask = c.input("mask");
    if (c.needs("self")) g["self"] = masked_fill(c.grad(), mask, 0);
    if (c.needs("value")) g["value"] = sum_all(where(mask, c.grad(), 0.0));
  });
  d.Def("masked_select", {"mask"}, [](Ctx& c, Grads& g) {
    Tensor mask = c.input("mask");
    const SymDimVector& sizes = c.sizes("self");
    Tensor z = zeros(sizes, c.grad().dtype(), c.grad().device());
    Tensor full_mask = expand(mask, sizes);
    Tensor filled = CallOp<Tensor>(KILN_OP("aten::index_put"), expand(z, z->sym_sizes()), OptionalTensorList{full_mask},
                                   c.grad(), false);
    g["self"] = filled;
  });
  d.Def("tril", {}, [](Ctx& c, Grads& g) { g["self"] = ops::tril(c.grad(), c.i64("diagonal")); });
  d.Def("triu", {}, [](Ctx& c, Grads& g) { g["self"] = ops::triu(c.grad(), c.i64("diagonal")); });
  d.Def("flip", {}, [](Ctx& c, Grads& g) { g["self"] = ops::flip(c.grad(), c.ints("dims")); });
  d.Def("constant_pad_nd", {}, [](Ctx& c, Grads& g) {
    SymList pad = c.symints("pad");
    for (SymInt& p : pad) p = SymInt(0) - p;
    g["self"] = ops::constant_pad_nd(c.grad(), pad, 0);
  });
}

}  // namespace kiln::autograd
