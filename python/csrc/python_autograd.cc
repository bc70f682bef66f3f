// python/csrc/python_autograd.cc: autograd's Python bindings.
#include "python/csrc/python_autograd.h"

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "tensor/fake_tensor.h"
#include "autograd/anomaly_mode.h"
#include "autograd/derivatives.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/variable.h"
#include "autograd/view_tracking.h"
#include "tensor/ops.h"
#include "python/csrc/arg_parser.h"
#include "python/csrc/python_dtype.h"
#include "python/csrc/python_tensor.h"
#include "tensor/autocast.h"
#include "python/csrc/tensor_caster.h"

namespace py = pybind11;

namespace kiln::python {
using namespace kiln::autograd;

namespace {

const Tensor& Self(PyObject* self) {
  const Tensor& t = UnpackTensor(self);
  if (!t.defined()) throw Error("kiln.Tensor object is not initialised");
  return t;
}

PyObject* Bool(bool b) { return PyBool_FromLong(b); }

// A custom Function's backward node: calls the Python ctx's backward (kiln.autograd.Function).
class PyFunctionNode : public Node {
 public:
  PyFunctionNode(py::object ctx, std::string name) : ctx_(std::move(ctx)), name_(std::move(name)) {}
  ~PyFunctionNode() override {
    py::gil_scoped_acquire gil;
    ctx_ = py::object();
  }
  std::string name() const override { return name_; }
  std::vector<bool> is_tensor_input;  // per forward argument
  // The zero gradient for output i (its shape, dtype and device), for a backward that asked for
  // None in place of zeros and needs them after all.
  Tensor ZerosFor(size_t i) const {
    const InputMeta& m = input_meta_.at(i);
    return ops::full(std::vector<SymInt>(m.sizes.begin(), m.sizes.end()), 0, m.dtype, m.device);
  }
  void ReleaseVariables() override {
    py::gil_scoped_acquire gil;
    if (ctx_ && py::hasattr(ctx_, "_free_saved")) ctx_.attr("_free_saved")();
  }
  TensorList Apply(TensorList&& grads) override {
    py::gil_scoped_acquire gil;
    py::tuple args(grads.size());
    // ctx.set_materialize_grads(False): an output that got no gradient passes None, not zeros.
    const bool materialize = py::getattr(ctx_, "_materialize_grads", py::bool_(true)).cast<bool>();
    for (size_t i = 0; i < grads.size(); ++i) {
      Tensor g = grads[i];
      if (!g.defined() && !materialize) {
        args[i] = py::none();
        continue;
      }
      if (!g.defined() && i < input_meta_.size()) g = ZerosFor(i);
      args[i] = py::reinterpret_steal<py::object>(WrapTensor(g));
    }
    // The ctx reaches its node only during backward (saved outputs re-link to it; a permanent
    // reference would be a cycle).
    ctx_.attr("_node") = py::cast(std::static_pointer_cast<Node>(shared_from_this()));
    py::object out;
    try {
      out = ctx_.attr("_do_backward")(*args);
    } catch (...) {
      py::delattr(ctx_, "_node");
      throw;
    }
    py::delattr(ctx_, "_node");
    TensorList result;
    auto take = [&](py::handle h) {
      if (h.is_none()) result.emplace_back();
      else if (IsTensor(h.ptr())) result.push_back(UnpackTensor(h.ptr()));
      else throw TypeError(StrCat("expected a Tensor or None as the gradient returned by ", name_, ".backward, got ",
                                  Py_TYPE(h.ptr())->tp_name));
    };
    if (py::isinstance<py::tuple>(out) || py::isinstance<py::list>(out)) {
      for (py::handle h : out) take(h);
    } else {
      take(out);
    }
    // Trailing extra Nones are allowed (PyTorch ignores them); too few or a gradient for a
    // non-tensor input is an error.
    while (result.size() > next_edges_.size() && !result.back().defined()) result.pop_back();
    if (result.size() != next_edges_.size())
      throw Error(StrCat("function ", name_, " returned an incorrect number of gradients (expected ",
                         next_edges_.size(), ", got ", result.size(), ")"));
    // A gradient for a non-tensor argument is a bug in backward (PyTorch refuses it too).
    for (size_t i = 0; i < result.size() && i < is_tensor_input.size(); ++i)
      if (!is_tensor_input[i] && result[i].defined())
        throw Error(StrCat("function ", name_, " returned a gradient different than None at position ", i + 1,
                           ", but the corresponding forward input was not a Variable"));
    return result;
  }

 private:
  py::object ctx_;
  std::string name_;
};

std::vector<Edge> EdgesOf(const std::vector<Tensor>& ts, const char* what) {
  std::vector<Edge> out;
  for (const Tensor& t : ts) {
    Edge e = GradientEdge(t);
    if (!e.valid() && std::string(what) == "root")
      throw Error("element 0 of tensors does not require grad and does not have a grad_fn");
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

// --- TensorBase attributes -------------------------------------------------------------------

PyObject* GetRequiresGrad(PyObject* self, void*) { return Guarded([&] { return Bool(RequiresGrad(Self(self))); }); }
int SetRequiresGradAttr(PyObject* self, PyObject* value, void*) {
  try {
    if (!value || !PyBool_Check(value)) throw TypeError("requires_grad must be a bool");
    SetRequiresGrad(Self(self), value == Py_True);
    return 0;
  } catch (...) {
    TranslateCurrentException();
    return -1;
  }
}
PyObject* GetGrad(PyObject* self, void*) {
  return Guarded([&]() -> PyObject* {
    const Tensor& t = Self(self);
    AutogradMeta* m = GetMeta(t);
    if (m && m->grad_fn_ && !m->retains_grad_ &&
        PyErr_WarnEx(PyExc_UserWarning,
                     "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
                     "attribute won't be populated during autograd.backward(). If you indeed want the .grad field "
                     "to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor.",
                     1) < 0)
      return nullptr;
    return WrapTensor(Grad(t));
  });
}
int SetGradAttr(PyObject* self, PyObject* value, void*) {
  try {
    if (!value || value == Py_None) {
      SetGrad(Self(self), Tensor());
      return 0;
    }
    if (!IsTensor(value)) throw TypeError(StrCat("assigned grad expected to be a Tensor or None but got grad of type ",
                                                 Py_TYPE(value)->tp_name));
    SetGrad(Self(self), UnpackTensor(value));
    return 0;
  } catch (...) {
    TranslateCurrentException();
    return -1;
  }
}
PyObject* GetGradFn(PyObject* self, void*) {
  return Guarded([&]() -> PyObject* {
    std::shared_ptr<Node> fn = GradFn(Self(self));
    if (!fn) Py_RETURN_NONE;
    return py::cast(fn).release().ptr();
  });
}
// as PyTorch's property, through the accessor that regenerates a stale view's history
PyObject* GetIsLeaf(PyObject* self, void*) { return Guarded([&] { return Bool(GradFn(Self(self)) == nullptr); }); }
// Tensor._base: the tensor a view shares its storage with (never itself a view), or None. kiln
// records the relation for views made under autograd (a float view of a tensor that requires
// grad), which is what the compiled runtime asks it for, and for views marked at creation (made
// under no_grad, split's outputs: Note [View creation]); PyTorch records it for every view.
PyObject* GetBase(PyObject* self, void*) {
  return Guarded([&]() -> PyObject* {
    const Tensor& t = Self(self);
    AutogradMeta* m = GetMeta(t);
    if (m && m->is_view_ && m->base_.defined()) return WrapTensor(m->base_);
    if (t->view_creation() != ViewCreation::kDefault && t->view_root()) return WrapTensor(Tensor(t->view_root()));
    Py_RETURN_NONE;
  });
}
PyObject* GetRetainsGrad(PyObject* self, void*) {
  return Guarded([&] {
    AutogradMeta* m = GetMeta(Self(self));
    return Bool(m && m->retains_grad_);
  });
}
PyObject* GetOutputNr(PyObject* self, void*) {
  return Guarded([&] {
    AutogradMeta* m = GetMeta(Self(self));
    return PyLong_FromLong(m ? m->output_nr_ : 0);
  });
}
PyObject* GetIsInference(PyObject* self, void*) {
  return Guarded([&] {
    AutogradMeta* m = GetMeta(Self(self));
    return Bool(m && m->is_inference_);
  });
}
PyObject* MethodIsInference(PyObject* self, PyObject*) { return GetIsInference(self, nullptr); }

PyObject* MethodRequiresGrad_(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return Guarded([&]() -> PyObject* {
    PyObject* flag = nargs > 0 ? args[0] : nullptr;
    if (kwnames) {
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(kwnames); ++i) {
        const char* k = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, i));
        if (std::string(k) != "requires_grad")
          throw TypeError(StrCat("requires_grad_() got an unexpected keyword argument '", k, "'"));
        flag = args[nargs + i];
      }
    }
    if (nargs > 1) throw TypeError("requires_grad_() takes at most 1 argument");
    bool value = true;
    if (flag) {
      if (!PyBool_Check(flag)) throw TypeError(StrCat("requires_grad_(): argument 'requires_grad' (position 1) must be "
                                                      "bool, not ", Py_TYPE(flag)->tp_name));
      value = flag == Py_True;
    }
    SetRequiresGrad(Self(self), value);
    Py_INCREF(self);
    return self;
  });
}

PyObject* MethodDetach(PyObject* self, PyObject*) { return Guarded([&] { return WrapTensor(Detach(Self(self))); }); }
PyObject* MethodDetach_(PyObject* self, PyObject*) {
  return Guarded([&]() -> PyObject* {
    const Tensor& t = Self(self);
    if (AutogradMeta* m = GetMeta(t)) {
      if (m->is_view_) throw Error("Can't detach views in-place. Use detach() instead.");
      m->grad_fn_ = nullptr;
      m->requires_grad_ = false;
      t->set_keys(t->keys().remove(DispatchKey::Autograd));
    }
    Py_INCREF(self);
    return self;
  });
}
PyObject* MethodRetainGrad(PyObject* self, PyObject*) {
  return Guarded([&]() -> PyObject* {
    RetainGrad(Self(self));
    Py_RETURN_NONE;
  });
}

// --- module functions ------------------------------------------------------------------------

void InitAutogradBindings(py::module_& m) {
  py::class_<Node, std::shared_ptr<Node>>(m, "_Node")
      .def("name", &Node::name)
      .def_property_readonly("next_functions", [](const Node& n) {
        py::tuple out(n.next_edges().size());
        for (size_t i = 0; i < n.next_edges().size(); ++i) {
          const Edge& e = n.next_edges()[i];
          out[i] = py::make_tuple(e.fn ? py::cast(e.fn) : py::none(), e.input_nr);
        }
        return out;
      })
      .def_property_readonly("variable", [](const Node& n) -> py::object {
        if (auto* acc = dynamic_cast<const AccumulateGrad*>(&n))
          return py::reinterpret_steal<py::object>(WrapTensor(acc->variable()));
        throw py::attribute_error(n.name() + " object has no attribute 'variable'");
      })
      .def_property_readonly("metadata", [](Node& n) -> py::object {
        if (!n.py_metadata) {
          auto* d = new py::dict();
          n.py_metadata = std::shared_ptr<void>(d, [](void* p) {
            py::gil_scoped_acquire gil;
            delete static_cast<py::dict*>(p);
          });
        }
        return *static_cast<py::dict*>(n.py_metadata.get());
      })
      .def("_register_hook", [](Node& n, py::function fn) {
        // fn(grad_inputs, grad_outputs) -> None or new grad_inputs (None entries keep the old one).
        return n.AddPostHook([fn](TensorList& gi, const TensorList& go) {
          py::gil_scoped_acquire gil;
          auto to_tuple = [](const TensorList& l) {
            py::tuple t(l.size());
            for (size_t i = 0; i < l.size(); ++i) t[i] = py::reinterpret_steal<py::object>(WrapTensor(l[i]));
            return t;
          };
          py::object r = fn(to_tuple(gi), to_tuple(go));
          if (r.is_none()) return;
          py::sequence seq = r.cast<py::sequence>();
          // Extra trailing Nones are fine: torch's node may have an edge for a scalar operand here.
          size_t n = seq.size();
          while (n > gi.size() && py::object(seq[n - 1]).is_none()) --n;
          if (n != gi.size())
            throw Error(StrCat("hook returned an incorrect number of gradients (expected ", gi.size(), ", got ",
                               seq.size(), ")"));
          for (size_t i = 0; i < gi.size(); ++i) {
            py::object h = seq[i];
            if (h.is_none()) continue;
            if (!IsTensor(h.ptr())) throw TypeError("a grad_fn hook must return Tensors or None");
            gi[i] = UnpackTensor(h.ptr());
          }
        });
      })
      .def("_remove_hook", [](Node& n, int id) { n.RemovePostHook(id); })
      .def("_zeros_for_output", [](const Node& n, size_t i) -> py::object {
        auto* f = dynamic_cast<const PyFunctionNode*>(&n);
        if (!f) throw py::type_error(n.name() + " is not a custom function's node");
        return py::reinterpret_steal<py::object>(WrapTensor(f->ZerosFor(i)));
      })
      .def("_register_prehook", [](Node& n, py::function fn) {
        // Runs on each input gradient slot separately.
        return n.AddPreHook(0, [fn](const Tensor& g) -> Tensor {
          py::gil_scoped_acquire gil;
          py::object r = fn(py::reinterpret_steal<py::object>(WrapTensor(g)));
          if (r.is_none()) return Tensor();
          // Unpacking a non-tensor would crash: say what was wrong instead.
          if (!IsTensor(r.ptr())) throw TypeError("a grad_fn pre-hook must return a Tensor or None");
          return UnpackTensor(r.ptr());
        });
      })
      .def("_remove_prehook", [](Node& n, int id) { n.RemovePreHook(id); })
      .def("__repr__", [](const Node& n) {
        char addr[32];
        std::snprintf(addr, sizeof(addr), "%p", static_cast<const void*>(&n));
        return "<" + n.name() + " object at " + addr + ">";
      })
      .def("__call__", [](Node& n, py::args grads) {
        TensorList in;
        for (py::handle h : grads) in.push_back(h.is_none() ? Tensor() : UnpackTensor(h.ptr()));
        TensorList out = n.Apply(std::move(in));
        py::tuple t(out.size());
        for (size_t i = 0; i < out.size(); ++i) t[i] = py::reinterpret_steal<py::object>(WrapTensor(out[i]));
        return t;
      });

  // How autograd handles an op: "formula", "non_differentiable", "composite" (its parts are
  // differentiated) or "none" (differentiating it raises NotImplementedError).
  // Records `view` as a view of `base` though no op recorded it (base needs no grad), so that an
  // in-place write of a value requiring grad into it reaches base (Tensor.__setitem__).
  m.def("_track_view", [](const Tensor& view, const Tensor& base) {
    if (!view.is_same(base)) MarkView(view, base);
  });
  m.def("_autograd_kind", [](const std::string& full_name) -> std::string {
    const Op& op = Registry::Get().FindOrThrow(full_name);
    if (auto* d = static_cast<const Derivative*>(op.autograd_info.get()))
      return d->non_differentiable ? "non_differentiable" : "formula";
    return op.HasComposite() ? "composite" : "none";
  });
  // fn(saved, grads) for each saved input a formula unpacks on this thread (None: stop);
  // returns the previous fn (or None)
  m.def("_set_saved_input_observer", [](py::object fn) -> py::object {
    auto holder = std::make_shared<py::object>(fn);
    autograd::SavedInputObserver observer;
    if (!fn.is_none()) {
      observer = [holder](const Tensor& saved, const TensorList& grads) {
        py::gil_scoped_acquire gil;
        py::list gs;
        for (const Tensor& g : grads) gs.append(py::reinterpret_steal<py::object>(WrapTensor(g)));
        (*holder)(py::reinterpret_steal<py::object>(WrapTensor(saved)), gs);
      };
    }
    autograd::SavedInputObserver previous = autograd::SetSavedInputObserver(std::move(observer));
    if (!previous) return py::none();
    // the previous observer as a Python callable again (only ours are ever installed)
    return py::cpp_function([previous](const Tensor& saved, py::list grads) {
      TensorList gs;
      for (py::handle g : grads) gs.push_back(g.is_none() ? Tensor() : UnpackTensor(g.ptr()));
      previous(saved, gs);
    });
  });
  // kiln.profiler's view of backward: fn(node_name, begin) around each node the engine runs.
  m.def("_set_autograd_node_observer", [](py::object fn) {
    autograd::NodeObserver observer;
    if (!fn.is_none()) {
      auto holder = std::make_shared<py::object>(fn);
      observer = [holder](const autograd::Node& node, bool begin) {
        py::gil_scoped_acquire gil;
        try {
          (*holder)(node.name(), begin);
        } catch (py::error_already_set& e) {
          e.discard_as_unraisable("kiln autograd node observer");  // never into the engine (a destructor)
        }
      };
    }
    autograd::SetNodeObserver(std::move(observer));
  });
  m.def("is_grad_enabled", [] { return GradMode::is_enabled(); });
  m.def("_set_grad_enabled", [](bool on) { GradMode::set_enabled(on); });
  // a compiled function's forward runs under no_grad but below autograd: the views its graph
  // makes are the compiled op's own, not views made under no_grad (Note [View creation])
  m.def("_set_below_autograd", [](bool below) { return SetBelowAutograd(below); });
  // Autocast (tensor/autocast.h): the thread's state as (enabled, dtype); kiln.amp.autocast sets it.
  m.def("_set_autocast_state", [](bool enabled, py::object dtype) {
    if (!IsDtype(dtype.ptr())) throw TypeError("_set_autocast_state: dtype must be a kiln.dtype");
    SetAutocast(enabled, reinterpret_cast<PyDtype*>(dtype.ptr())->scalar_type);
  });
  m.def("_get_autocast_state", [] {
    const AutocastState& s = TlsAutocast();
    return py::make_tuple(s.enabled, py::reinterpret_borrow<py::object>(DtypeObject(s.dtype)));
  });
  m.def("is_inference_mode_enabled", [] { return InferenceMode::is_enabled(); });
  m.def("_set_inference_mode", [](bool on) { InferenceMode::set_enabled(on); });

  m.def("_run_backward", [](const std::vector<Tensor>& tensors, const std::vector<std::optional<Tensor>>& grads,
                            bool keep_graph, bool create_graph, const std::vector<Tensor>& inputs, bool allow_unused,
                            bool accumulate_grad) {
    // Backward of fake tensors runs under their mode, so the gradients the engine and the formulas
    // create (root ones, zeros for missing grads, scalar constants) are fake too.
    std::optional<FakeModeGuard> fake_guard;
    if (ActiveFakeMode() == nullptr) {
      for (const Tensor& t : tensors) {
        if (FakeTensorModePtr m = FakeModePtrOf(t)) { fake_guard.emplace(std::move(m)); break; }
      }
    }
    std::vector<Edge> roots = EdgesOf(tensors, "root");
    TensorList root_grads;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i];
      std::optional<Tensor> g = i < grads.size() ? grads[i] : std::nullopt;
      if (!g || !g->defined()) {
        if (t.numel() != 1) throw Error("grad can be implicitly created only for scalar outputs");
        root_grads.push_back(ops::full({}, 1, t.dtype(), t.device()));
        root_grads.back() = ops::view(root_grads.back(), std::vector<SymInt>(t->sym_sizes().begin(), t->sym_sizes().end()));
      } else {
        if (!(g->impl()->sym_sizes() == t->sym_sizes()))
          throw Error(StrCat("Mismatch in shape: grad_output[", i, "] has a shape of ", SizesToString((*g)->sym_sizes()),
                             " and output[", i, "] has a shape of ", SizesToString(t->sym_sizes()), "."));
        root_grads.push_back(*g);
      }
    }
    std::vector<Edge> input_edges;
    for (const Tensor& t : inputs) {
      if (!RequiresGrad(t)) throw Error("One of the differentiated Tensors does not require grad");
      input_edges.push_back(GradientEdge(t));
    }
    BackwardOptions opts;
    opts.keep_graph = keep_graph;
    opts.create_graph = create_graph;
    opts.allow_unused = allow_unused;
    opts.accumulate_grad = accumulate_grad;
    TensorList out = RunBackward(roots, root_grads, input_edges, opts);
    // backward(inputs=[non_leaf]): the engine captured its gradient; it accumulates into .grad
    // like a leaf's would (leaves were accumulated by their AccumulateGrad).
    if (accumulate_grad) {
      AutoGradMode mode(create_graph);
      for (size_t i = 0; i < inputs.size(); ++i) {
        if (IsLeaf(inputs[i]) || !out[i].defined()) continue;
        Tensor prev = Grad(inputs[i]);
        SetGrad(inputs[i], prev.defined() ? ops::add(prev, out[i]) : ops::clone(create_graph ? out[i] : Detach(out[i])));
      }
    }
    py::tuple result(out.size());
    for (size_t i = 0; i < out.size(); ++i) result[i] = py::reinterpret_steal<py::object>(WrapTensor(out[i]));
    return result;
  });

  m.def("_register_tensor_hook", [](const Tensor& t, py::function fn) {
    return RegisterHook(t, [fn](const Tensor& g) -> Tensor {
      py::gil_scoped_acquire gil;
      py::object r = fn(py::reinterpret_steal<py::object>(WrapTensor(g)));
      if (r.is_none()) return Tensor();
      if (!IsTensor(r.ptr())) throw TypeError("a tensor hook must return a Tensor or None");
      return UnpackTensor(r.ptr());
    });
  });
  m.def("_remove_tensor_hook", [](const Tensor& t, int id) { RemoveHook(t, id); });
  // anomaly mode (autograd/anomaly_mode.h): the flags, and Python's capture and report of a
  // node's forward traceback (kiln/autograd/anomaly_mode.py)
  m.def("_set_anomaly_enabled", [](bool enabled, bool check_nan) { AnomalyMode::set_enabled(enabled, check_nan); });
  m.def("_is_anomaly_enabled", [] { return AnomalyMode::is_enabled(); });
  m.def("_is_anomaly_check_nan_enabled", [] { return AnomalyMode::should_check_nan(); });
  m.def("_set_anomaly_hooks", [](py::function capture, py::function report) {
    auto call = [](py::function fn) {
      return [fn](Node& node) {
        py::gil_scoped_acquire gil;
        fn(py::cast(node.shared_from_this()));
      };
    };
    SetAnomalyHooks(call(capture), call(report));
  });
  m.def("_register_post_accumulate_grad_hook", [](const Tensor& t, py::function fn) {
    return RegisterPostAccumulateGradHook(t, [fn](const Tensor& leaf) {
      py::gil_scoped_acquire gil;
      py::object r = fn(py::reinterpret_steal<py::object>(WrapTensor(leaf)));
      if (!r.is_none())  // PyTorch's words for a post-accumulate hook that returns something
        throw TypeError(StrCat("expected Variable, but hook returned '", Py_TYPE(r.ptr())->tp_name, "'"));
    });
  });
  m.def("_remove_post_accumulate_grad_hook",
        [](const Tensor& t, int id) { RemovePostAccumulateGradHook(t, id); });
  // Tensor.data: a detached alias with a fresh version counter.
  m.def("_data_alias", [](const Tensor& t) {
    Tensor alias = Detach(t);
    alias->share_version_counter(std::make_shared<VersionCounter>());
    return alias;
  });
  // A custom Function's saved output, re-linked to its node for double backward (the saved copy
  // has no grad_fn, or node -> ctx -> output -> node would be a cycle that is never freed).
  m.def("_alias_with_history", [](const Tensor& t, const std::shared_ptr<Node>& node, uint32_t output_nr) {
    Tensor alias = ShallowAlias(t);
    SetHistory(alias, node, output_nr);
    return alias;
  });

  // Tensor._make_subclass(cls, data, requires_grad): a `cls` object sharing data's storage.
  m.def("_make_subclass", [](py::object cls, const Tensor& data, bool requires_grad) {
    if (!PyType_Check(cls.ptr()) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls.ptr()), g_tensor_base_type))
      throw TypeError("_make_subclass: cls must be a subclass of kiln.Tensor");
    auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
    Tensor alias = Detach(data);
    PyObject* obj = type->tp_alloc(type, 0);
    if (!obj) throw py::error_already_set();
    auto* pt = reinterpret_cast<PyTensor*>(obj);
    new (&pt->tensor) Tensor(alias);
    alias->set_pyobj(obj);
    if (requires_grad) SetRequiresGrad(alias, true);
    return py::reinterpret_steal<py::object>(obj);
  });

  // Records a custom Function call: ctx's backward becomes grad_fn of `outputs`.
  m.def("_record_function", [](py::object ctx, const std::string& name, const std::vector<std::optional<Tensor>>& inputs,
                               const std::vector<Tensor>& outputs, const std::vector<bool>& differentiable) {
    auto node = std::make_shared<PyFunctionNode>(ctx, name);
    for (const auto& t : inputs) {
      node->add_next_edge(t && t->defined() ? GradientEdge(*t) : Edge{});
      node->is_tensor_input.push_back(t && t->defined());
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      node->add_input_meta(outputs[i]);
      if (differentiable[i] && (IsFloating(outputs[i].dtype()) || IsComplex(outputs[i].dtype()))) SetHistory(outputs[i], node, static_cast<uint32_t>(i));
    }
  });
  // `t.data = new`: t keeps its identity and autograd state and takes new's storage and layout.
  m.def("_set_data", [](const Tensor& t, const Tensor& data) {
    // CPU and CUDA tensors are the same kind of tensor (PyTorch's _has_compatible_shallow_copy_type
    // holds for dense tensors of any device), so `param.data = param.cuda()` moves the parameter
    // in place, keeping its identity (what Module.to does); meta and fake tensors stay apart.
    auto dense = [](const Tensor& x) { return x.device().is_cpu() || x.device().is_cuda(); };
    if (t.device() != data.device() && !(dense(t) && dense(data) && !t->keys().has(DispatchKey::Fake) &&
                                         !data->keys().has(DispatchKey::Fake)))
      throw Error(StrCat("Attempted to call `variable.set_data(tensor)`, but `variable` and `tensor` have "
                         "incompatible tensor type (", t.device().str(), " vs ", data.device().str(), ")."));
    // A leaf whose dtype, device or sizes change gets a new AccumulateGrad (its input metadata changed);
    // graphs already recorded keep the old one.
    if (AutogradMeta* m = GetMeta(t))
      if (t.dtype() != data.dtype() || t.device() != data.device() || !(t->sym_sizes() == data->sym_sizes()))
        m->grad_accumulator_.reset();
    if (t.device() != data.device()) t->set_device(data.device());
    t->set_storage(data->storage());
    t->set_dtype(data.dtype());
    t->set_sizes_and_strides(data->sym_sizes(), data->sym_strides(), data->sym_storage_offset());
  });
  m.def("_mark_inference", [](const Tensor& t) { MarkInference(t); });
}

}  // namespace kiln::python
