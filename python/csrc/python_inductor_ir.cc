// python/csrc/python_inductor_ir.cc: kiln._C._inductor.ir, the loop IR's indices and bodies
// (inductor/ir, Note [Bodies]) as typed Python objects. The lowerings (python/kiln/_inductor) trace
// each value's function once through a Tracer into a Body; GraphLowering's KernelBuilder and its
// probes place bodies into kernels with instantiate(), answering each read from Python (which
// value is realized where) until the values themselves move into C++.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>

#include "inductor/ir/affine.h"
#include "inductor/ir/body.h"
#include "python/csrc/python_inductor.h"
#include "runtime/error.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

using inductor::ir::Affine;
using inductor::ir::Body;
using inductor::ir::Placement;

// Per-dimension indices of a read, over a kernel's (or a body's) variables.
struct Indices {
  std::vector<Affine> index;
};

std::vector<Affine> AffinesOf(const py::handle& idx) {
  if (py::isinstance<Indices>(idx)) return idx.cast<const Indices&>().index;
  std::vector<Affine> out;
  for (const py::handle& d : idx) out.push_back(d.cast<Affine>());
  return out;
}

Placement PlacementOf(const py::handle& dims, const std::optional<Affine>& reduced) {
  Placement at;
  at.dims = AffinesOf(dims);
  if (reduced) {
    at.reduced = *reduced;
    at.has_reduced = true;
  }
  return at;
}

py::object ExprObject(codegen::ExprPtr e) {
  PyObject* o = WrapExpr(std::move(e));
  if (o == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(o);
}

// A Reader answered by a Python callable(value, Indices, as_of) -> kernel_ir.Expr.
class PyReader : public inductor::ir::Reader {
 public:
  explicit PyReader(py::function fn) : fn_(std::move(fn)) {}
  codegen::ExprPtr ReadValue(int64_t value, const std::vector<Affine>& index, int64_t as_of) override {
    py::object e = fn_(value, Indices{index}, as_of);
    return UnwrapExpr(e.ptr(), "a reader's result");
  }

 private:
  py::function fn_;
};

py::dict CoeffsOf(const Affine& a) {
  py::dict d;
  for (const auto& [v, c] : a.terms()) d[py::int_(v)] = c;
  return d;
}

}  // namespace

void InitInductorIrBindings(py::module_& inductor) {
  py::module_ m = inductor.def_submodule(
      "ir", "The loop IR's indices and bodies (inductor/ir, Note [Bodies]): Affine, Indices, Body, Tracer, instantiate.");

  py::class_<Affine>(m, "Affine", "offset + sum(coeffs[v] * v) over loop variables (ints; -1 is the inner loop).")
      .def(py::init([](int64_t offset, std::optional<py::dict> coeffs) {
             Affine a(offset);
             if (coeffs)
               for (const auto& [v, c] : *coeffs) a.AddTerm(v.cast<int>(), c.cast<int64_t>());
             return a;
           }),
           py::arg("offset") = 0, py::arg("coeffs") = py::none())
      .def_static("var", &Affine::Var, py::arg("v"))
      .def_property_readonly("offset", &Affine::offset)
      .def_property_readonly("coeffs", &CoeffsOf, "{variable: coefficient}, nonzero coefficients only")
      .def("scale", &Affine::Scaled, py::arg("k"))
      // one overload taking either: pybind11 tries overloads in turn, and a failed one cost more
      // than the addition (an Affine plus an int took 1.4 us)
      .def("__add__", [](const Affine& a, const py::handle& b) -> py::object {
        if (PyLong_CheckExact(b.ptr())) return py::cast(a + Affine(b.cast<int64_t>()));
        if (!py::isinstance<Affine>(b)) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
        return py::cast(a + b.cast<const Affine&>());
      })
      .def("__radd__", [](const Affine& a, int64_t k) { return a + Affine(k); })
      .def("__eq__", [](const Affine& a, const Affine& b) { return a == b; })
      .def("__hash__", [](const Affine& a) { return static_cast<int64_t>(a.Hash() >> 1); })
      .def("is_const", &Affine::IsConst)
      .def("ir_index", [](const Affine& a, int n_outer) {
             codegen::Index ix = inductor::ir::KernelIndex(a, n_outer);
             return py::make_tuple(ix.offset, ix.outer_strides, ix.inner_stride);
           }, py::arg("n_outer"), "(offset, outer strides, inner stride): a kernel index's arguments")
      .def("__repr__", [](const Affine& a) { return "Affine(" + a.ToString() + ")"; });

  py::class_<Indices>(m, "Indices", "A read's per-dimension indices over a kernel's loop variables.")
      .def(py::init([](const py::handle& idx) { return Indices{AffinesOf(idx)}; }), py::arg("index"))
      .def("__len__", [](const Indices& i) { return i.index.size(); })
      .def("__getitem__", [](const Indices& i, int64_t k) {
        const int64_t n = static_cast<int64_t>(i.index.size());
        if (k < 0) k += n;
        if (k < 0 || k >= n) throw py::index_error("Indices: index out of range");
        return i.index[k];
      })
      .def("element", [](const Indices& i, const std::vector<int64_t>& strides) {
             return inductor::ir::ElementOffset(i.index, strides);
           }, py::arg("strides"), "The element offset these indices address in memory of these strides.")
      .def("load", [](const Indices& i, int buffer, const std::vector<int64_t>& strides, int n_outer) {
             return ExprObject(codegen::Expr::Load(
                 buffer, inductor::ir::KernelIndex(inductor::ir::ElementOffset(i.index, strides), n_outer)));
           }, py::arg("buffer"), py::arg("strides"), py::arg("n_outer"),
           "kernel_ir.load of buffer `buffer` (of these strides) at these indices, in a kernel of n_outer outer loops.")
      .def("is_identity_except", [](const Indices& i, int axis) {
             int k = 0;
             for (int d = 0; d < static_cast<int>(i.index.size()); ++d) {
               if (d == axis) continue;
               if (i.index[d] != Affine::Var(k++)) return false;
             }
             return true;
           }, py::arg("axis"),
           "Whether every index but `axis`'s is the loop variable of its position among them (d0, d1, ...).")
      .def("__repr__", [](const Indices& i) {
        std::string s = "Indices[";
        for (size_t d = 0; d < i.index.size(); ++d) s += (d ? ", " : "") + i.index[d].ToString();
        return s + "]";
      });

  py::class_<Body, std::shared_ptr<Body>>(m, "Body", "A value's traced expression and the reads it makes (Note [Bodies]).")
      .def_property_readonly("expr", [](const Body& b) { return ExprObject(b.expr); })
      .def_property_readonly("read_values", [](const Body& b) {
        std::vector<int64_t> out;
        for (const auto& r : b.reads) out.push_back(r.value);
        return out;
      }, "The values it reads (handles), in order, one per read.")
      .def("__eq__", [](const Body& a, const Body& b) { return a == b; })
      .def("__hash__", [](const Body& b) { return static_cast<int64_t>(b.Hash() >> 1); })
      .def("__str__", &Body::ToString)
      .def("__repr__", [](const Body& b) { return "<Body\n" + b.ToString() + ">"; });

  py::class_<inductor::ir::Tracer>(m, "Tracer", "Records the reads of an expression being traced (Note [Bodies]).")
      .def(py::init<>())
      .def("read", [](inductor::ir::Tracer& t, int64_t value, const py::handle& idx, int64_t as_of) {
             return ExprObject(t.Read(value, AffinesOf(idx), as_of));
           }, py::arg("value"), py::arg("index"), py::arg("as_of") = -1)
      .def("inline", [](inductor::ir::Tracer& t, const Body& body, const py::handle& dims,
                        std::optional<Affine> reduced, int64_t as_of) {
             return ExprObject(t.Inline(body, PlacementOf(dims, reduced), as_of));
           }, py::arg("body"), py::arg("dims"), py::arg("reduced") = py::none(), py::arg("as_of") = -1)
      .def("finish", [](inductor::ir::Tracer& t, const py::handle& expr) {
             return std::make_shared<Body>(t.Finish(UnwrapExpr(expr.ptr(), "Tracer.finish's expression")));
           }, py::arg("expr"));

  m.def("instantiate", [](const Body& body, const py::handle& dims, py::function reader,
                          std::optional<Affine> reduced, int64_t as_of) {
          PyReader r(std::move(reader));
          return ExprObject(inductor::ir::Instantiate(body, PlacementOf(dims, reduced), r, as_of));
        }, py::arg("body"), py::arg("dims"), py::arg("reader"), py::arg("reduced") = py::none(),
        py::arg("as_of") = -1,
        "body placed at dims (and reduced, for r): reader(value, Indices, as_of) -> kernel_ir.Expr answers each read.");
}

}  // namespace kiln::python
