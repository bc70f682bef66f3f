// python/csrc/python_inductor_ir.cc: kiln._C._inductor.ir, the loop IR (inductor/ir) as typed
// Python objects: indices and bodies (Note [Bodies]) and the values (Note [Values]). A lowering
// (python/kiln/_inductor/lowering) makes a Pointwise or Reduction from its element function,
// which the constructor traces once, here, through a TraceCtx; the Scheduler (inductor/scheduler)
// places bodies into kernels. `instantiate` with a Python reader remains for tests and tools.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "inductor/ir/affine.h"
#include "inductor/ir/body.h"
#include "inductor/ir/strides.h"
#include "inductor/ir/values.h"
#include "inductor/scheduler/realization.h"
#include "python/csrc/python_dtype.h"
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

using inductor::ir::Buffer;
using inductor::ir::LoopSpace;
using inductor::ir::Pointwise;
using inductor::ir::Reduction;
using inductor::ir::Traced;
using inductor::ir::Value;
using ValuePtr = std::shared_ptr<Value>;

py::object DtypeOf(const Value& v) { return py::reinterpret_borrow<py::object>(DtypeObject(v.dtype())); }

std::set<std::string> OpsOf(const py::handle& ops) {
  std::set<std::string> out;
  for (const py::handle& op : ops) out.insert(op.cast<std::string>());
  return out;
}

py::set OpsObject(const std::set<std::string>& ops) {
  py::set out;
  for (const std::string& op : ops) out.add(py::str(op));
  return out;
}

py::set OriginsObject(const std::set<inductor::ir::Origin>& origins) {
  py::set out;
  for (const auto& o : origins) out.add(py::make_tuple(o.position, o.stack_trace));
  return out;
}

py::tuple ValuesObject(const std::vector<ValuePtr>& values) {
  py::tuple out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = py::cast(values[i]);
  return out;
}

// What a lowering's element function is called with, once, to trace its value's body: every read
// (`load` of a buffer, `read` of a lazy value, `reduction_value`) becomes one of the body's reads,
// decided where the body is placed; `inline` puts another value's body here (its code, never its
// buffer). `as_of`: the snapshot its reads of lazy values are decided by (Note [Realized as of]), -1 for
// the kernel's state where it is placed.
class TraceCtx {
 public:
  TraceCtx() : tracer_(std::make_shared<inductor::ir::Tracer>()), traced_(std::make_shared<Traced>()) {}

  py::object Read(const ValuePtr& value, const py::handle& idx) {
    KILN_CHECK_VALUE(value != nullptr, "TraceCtx.read: no value");
    auto& inputs = traced_->inputs;
    if (std::find(inputs.begin(), inputs.end(), value) == inputs.end()) inputs.push_back(value);
    const bool lazy = value->kind() == Value::Kind::kPointwise;
    return ExprObject(tracer_->Read(value->handle(), AffinesOf(idx), lazy ? as_of_ : -1));
  }

  py::object Inline(const std::shared_ptr<Pointwise>& value, const py::handle& idx) {
    KILN_CHECK_VALUE(value != nullptr, "TraceCtx.inline: no value");
    traced_->inlined.push_back(value);
    return ExprObject(tracer_->Inline(value->body(), PlacementOf(idx, std::nullopt), as_of_));
  }

  std::shared_ptr<TraceCtx> AsOf(int64_t as_of) const {
    auto ctx = std::make_shared<TraceCtx>(*this);
    ctx->as_of_ = as_of;
    return ctx;
  }

  // fn(ctx, [d0, d1, ...]) (and r, for a reduction's source) traced: its body and the values it read.
  static std::shared_ptr<const Traced> Trace(const py::handle& fn, size_t n_dims, bool reduced) {
    auto ctx = std::make_shared<TraceCtx>();
    py::list idx;
    for (size_t k = 0; k < n_dims; ++k) idx.append(Affine::Var(static_cast<int>(k)));
    py::object expr = reduced ? fn(ctx, idx, Affine::Var(inductor::ir::kReduced)) : fn(ctx, idx);
    ctx->traced_->body = std::make_shared<Body>(ctx->tracer_->Finish(UnwrapExpr(expr.ptr(), "a traced function's result")));
    return ctx->traced_;
  }

 private:
  std::shared_ptr<inductor::ir::Tracer> tracer_;
  std::shared_ptr<Traced> traced_;  // shared with the contexts AsOf makes
  int64_t as_of_ = -1;
};

// the accumulated value in a Reduction's traced `finish`
codegen::ExprPtr AccumulatorStandIn() { return codegen::Expr::Load(0, codegen::Index{}); }

py::object OptionalValue(const ValuePtr& v) { return v ? py::cast(v) : py::none(); }

py::dict CoeffsOf(const Affine& a) {
  py::dict d;
  for (const auto& [v, c] : a.terms()) d[py::int_(v)] = c;
  return d;
}

}  // namespace

ScalarType ScalarTypeArg(const py::handle& dtype, const char* what) {
  if (!IsDtype(dtype.ptr()))
    throw py::type_error(std::string(what) + " must be a kiln.dtype, not " + Py_TYPE(dtype.ptr())->tp_name);
  return reinterpret_cast<PyDtype*>(dtype.ptr())->scalar_type;
}

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

  // --- values (Note [Values]) ------------------------------------------------------------------
  py::class_<LoopSpace>(m, "LoopSpace", "A reduction's loop nest: outer loops over `kept`, the inner over `extent` elements of `axis`.")
      .def(py::init([](std::vector<int64_t> kept, int64_t extent, std::optional<int> axis) {
             return LoopSpace{std::move(kept), extent, axis};
           }), py::arg("kept"), py::arg("extent"), py::arg("axis") = py::none())
      .def_readonly("kept", &LoopSpace::kept)
      .def_readonly("extent", &LoopSpace::extent)
      .def_readonly("axis", &LoopSpace::axis)
      .def("__eq__", [](const LoopSpace& a, const py::handle& b) {
        return py::isinstance<LoopSpace>(b) && a == b.cast<const LoopSpace&>();
      })
      .def("__hash__", [](const LoopSpace& s) { return static_cast<int64_t>(s.Hash() >> 1); })
      .def("__repr__", &LoopSpace::ToString);

  py::class_<TraceCtx, std::shared_ptr<TraceCtx>>(m, "TraceCtx", "What a lowering's element function is traced with (its reads become the body's).")
      .def("read", &TraceCtx::Read, py::arg("value"), py::arg("index"))
      .def("load", &TraceCtx::Read, py::arg("value"), py::arg("index"))
      .def("reduction_value", &TraceCtx::Read, py::arg("value"), py::arg("index"))
      .def("inline", &TraceCtx::Inline, py::arg("value"), py::arg("index"))
      .def("as_of_snapshot", &TraceCtx::AsOf, py::arg("as_of"),
           "This trace with its reads of lazy values decided by the snapshot `as_of` (Note [Realized as of]).");

  py::class_<Value, ValuePtr>(m, "Value", "A value of a lowered graph (Note [Values]).")
      .def_property_readonly("handle", &Value::handle, "The int a body's reads name this value by.")
      .def_property_readonly("dtype", &DtypeOf)
      .def_property_readonly("shape", [](const Value& v) { return py::list(py::cast(v.shape())); })
      .def("numel", &Value::numel)
      .def_property("ops", [](const Value& v) { return OpsObject(v.ops); },
                    [](Value& v, const py::handle& ops) { v.ops = OpsOf(ops); },
                    "The aten op names its code folds in (kernel names).")
      .def_property_readonly("origins", [](const Value& v) { return OriginsObject(v.origins); },
                             "(node position, stack trace) of the graph nodes whose code it is.")
      .def("add_origin", [](Value& v, int64_t position, std::string stack_trace) {
             v.origins.insert({position, std::move(stack_trace)});
           }, py::arg("position"), py::arg("stack_trace"))
      .def("all_origins", [](const Value& v) { return OriginsObject(v.AllOrigins()); },
           "Its origins and those of every value inlined into it, recursively.")
      .def_property_readonly("group", [](const Value& v) { return ValuesObject(v.Group()); },
                             "The values one kernel computes together with it (itself among them); () when none.")
      .def_property_readonly("inputs", [](const Value& v) {
        return v.traced() ? ValuesObject(v.traced()->inputs) : py::tuple();
      }, "The values its body reads.")
      .def_property_readonly("inlined", [](const Value& v) {
        return v.traced() ? ValuesObject(v.traced()->inlined) : py::tuple();
      }, "The values whose bodies were put into its own.")
      .def("describe", &Value::ToString, "One line: kind, dtype, shape and ops.");

  py::class_<Buffer, Value, std::shared_ptr<Buffer>>(m, "Buffer", "A tensor in memory: a name in the wrapper, its layout, and where its memory comes from.")
      .def(py::init([](std::optional<std::string> name, const py::handle& dtype, std::vector<int64_t> shape,
                       std::vector<int64_t> stride, int64_t offset, const py::handle& origin) {
             if (py::isinstance<Buffer>(origin))
               return std::make_shared<Buffer>(std::move(name), ScalarTypeArg(dtype, "an inductor value's dtype"), std::move(shape),
                                               std::move(stride), offset, origin.cast<std::shared_ptr<Buffer>>());
             const std::string what = py::isinstance<py::str>(origin) ? origin.cast<std::string>() : "";
             if (what != "input" && what != "kernel")
               throw py::value_error("Buffer: origin must be \"input\", \"kernel\" or the Buffer it views, not " +
                                     py::repr(origin).cast<std::string>());
             return std::make_shared<Buffer>(std::move(name), ScalarTypeArg(dtype, "an inductor value's dtype"), std::move(shape), std::move(stride),
                                             offset, what == "input" ? Buffer::Source::kInput : Buffer::Source::kKernel);
           }), py::arg("name"), py::arg("dtype"), py::arg("shape"), py::arg("stride"), py::arg("offset") = 0,
           py::arg("origin") = "input")
      .def_readwrite("name", &Buffer::name, "Its name in the wrapper (None for a view not defined yet).")
      .def_property_readonly("stride", [](const Buffer& b) { return py::list(py::cast(b.stride())); })
      .def_property_readonly("offset", &Buffer::offset)
      .def_property_readonly("origin", [](const Buffer& b) -> py::object {
        switch (b.source()) {
          case Buffer::Source::kInput: return py::str("input");
          case Buffer::Source::kKernel: return py::str("kernel");
          case Buffer::Source::kView: return py::cast(b.base());
        }
        return py::none();
      }, "\"input\", \"kernel\", or the Buffer whose memory it views.")
      .def("is_contiguous", &Buffer::IsContiguous)
      .def("__repr__", [](const Buffer& b) {
        std::string shape = py::repr(py::cast(b.shape())).cast<std::string>();
        return b.name.value_or("None") + ": " + py::str(DtypeOf(b)).cast<std::string>() + " " + shape;
      });

  py::class_<Pointwise, Value, std::shared_ptr<Pointwise>>(m, "Pointwise", "A lazy value: one element's expression at symbolic indices, traced once.")
      .def(py::init([](const py::handle& dtype, std::vector<int64_t> shape, const py::handle& fn, const py::handle& ops,
                       const std::shared_ptr<Pointwise>& like) {
             std::shared_ptr<const Traced> traced = like ? like->shared_trace() : TraceCtx::Trace(fn, shape.size(), false);
             auto v = std::make_shared<Pointwise>(ScalarTypeArg(dtype, "an inductor value's dtype"), std::move(shape), std::move(traced));
             v->ops = OpsOf(ops);
             return v;
           }), py::arg("dtype"), py::arg("shape"), py::arg("fn"), py::arg("ops"), py::arg("like") = py::none(),
           "fn(ctx, indices) -> kernel_ir.Expr traced here, once; `like`: a Pointwise whose body this one shares "
           "(the same elements over other sizes).")
      .def_property_readonly("body", [](const Pointwise& v) { return std::const_pointer_cast<Body>(v.shared_trace()->body); })
      .def_readwrite("space", &Pointwise::space, "A LoopSpace: a value of reductions over that loop, computed by their kernel.")
      .def_property("squeeze_of", [](const Pointwise& v) { return OptionalValue(v.squeeze_of); },
                    [](Pointwise& v, const ValuePtr& of) { v.squeeze_of = of; },
                    "A value of the same elements with size-1 dimensions added or removed: realized as a view of it.")
      .def("fn", [](const std::shared_ptr<Pointwise>& v, TraceCtx& ctx, const py::handle& idx) { return ctx.Inline(v, idx); },
           py::arg("ctx"), py::arg("index"), "This value's code at index inside another's being traced.")
      .def("__repr__", &Pointwise::ToString);

  py::class_<Reduction, Value, std::shared_ptr<Reduction>>(m, "Reduction", "`kind` over the last axis of a traced source read at (kept dims, r).")
      .def(py::init([](const py::handle& dtype, std::vector<int64_t> kept, int64_t extent, std::string kind,
                       const py::handle& source_fn, const py::handle& ops, std::vector<int64_t> keepdim_shape,
                       const py::handle& finish) {
             std::shared_ptr<const Traced> source = TraceCtx::Trace(source_fn, kept.size(), true);
             codegen::ExprPtr fin;
             if (!finish.is_none())
               fin = UnwrapExpr(finish(ExprObject(AccumulatorStandIn())).ptr(), "a reduction's finish");
             auto v = std::make_shared<Reduction>(ScalarTypeArg(dtype, "an inductor value's dtype"), std::move(kept), extent, std::move(kind),
                                                  std::move(source), std::move(keepdim_shape), std::move(fin));
             v->ops = OpsOf(ops);
             // the graph being lowered sees every reduction made (sibling candidates: Note [Sibling reductions])
             if (auto* graph = inductor::scheduler::Realization::Current()) graph->reductions.push_back(v);
             return v;
           }), py::arg("dtype"), py::arg("kept"), py::arg("extent"), py::arg("kind"), py::arg("source_fn"),
           py::arg("ops"), py::arg("keepdim_shape"), py::arg("finish") = py::none(),
           "source_fn(ctx, kept indices, r) -> Expr traced once; finish(acc) -> Expr the value read from the accumulator.")
      .def_property_readonly("kept", [](const Reduction& r) { return py::list(py::cast(r.kept())); })
      .def_property_readonly("extent", &Reduction::extent)
      .def_property_readonly("kind", &Reduction::reduce)
      .def_property_readonly("source", [](const Reduction& r) { return std::const_pointer_cast<Body>(r.traced()->body); })
      .def_property_readonly("finish", [](const Reduction& r) { return r.finish() ? ExprObject(r.finish()) : py::none(); })
      .def_readwrite("axis", &Reduction::axis, "The reduced dimension of its keepdim shape.")
      .def_property_readonly("space", &Reduction::Space)
      .def("finished", [](const Reduction& r, const py::handle& acc) {
             return ExprObject(r.Finished(UnwrapExpr(acc.ptr(), "Reduction.finished's accumulator")));
           }, py::arg("acc"), "The value read from the accumulator expression acc.")
      .def("__repr__", &Reduction::ToString);

  m.def("kernel_dtype", [](const py::handle& dtype) { return codegen::DTypeName(inductor::ir::KernelDType(ScalarTypeArg(dtype, "an inductor value's dtype"))); },
        py::arg("dtype"), "The kernel IR type name of a kiln.dtype's elements (NotImplementedError: none).");
  m.def("dense_order", &inductor::ir::DenseOrder, py::arg("shape"), py::arg("stride"),
        "The dimensions of a dense layout from outermost to innermost in memory (None: not dense).");
  m.def("gapped_order", &inductor::ir::GappedOrder, py::arg("shape"), py::arg("stride"),
        "The dimensions of a layout with gaps between elements (`v[:, ::2]`), outermost first (None: not one).");
  m.def("expanded_dims", &inductor::ir::ExpandedDims, py::arg("shape"), py::arg("stride"),
        "The dimensions along which a layout repeats elements (stride 0, size above 1).");
  m.def("same_layout", &inductor::ir::SameLayout, py::arg("shape"), py::arg("a"), py::arg("b"),
        "Whether two stride lists address a tensor of this shape alike.");
  m.def("squeezed_strides", &inductor::ir::SqueezedStrides, py::arg("from_shape"), py::arg("from_stride"),
        py::arg("shape"), "A layout's strides seen with a shape differing only in size-1 dimensions.");
  m.def("value_of", [](int64_t handle) { return OptionalValue(inductor::ir::ValueOf(handle)); }, py::arg("handle"),
        "The live value with this handle (None once it is gone).");
  m.def("make_group", [](const std::vector<ValuePtr>& values) { Value::MakeGroup(values); }, py::arg("values"),
        "Makes the values one group: one kernel computes them together.");
}

}  // namespace kiln::python
