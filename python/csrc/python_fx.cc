// python/csrc/python_fx.cc: kiln._C._fx, the bindings of fx::Graph and fx::Node.
#include "python/csrc/python_fx.h"

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <cctype>
#include <unordered_map>

#include "python/csrc/python_dtype.h"
#include "python/csrc/python_symbolic.h"
#include "python/csrc/python_tensor.h"

namespace py = pybind11;

namespace kiln::python {

using fx::Argument;
using fx::Graph;
using fx::Kwargs;
using fx::Node;
using fx::Opcode;
using fx::Target;

namespace {

// CamelCase -> camel_case, as FX names nodes after the callables they call.
std::string SnakeCase(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (std::isupper(static_cast<unsigned char>(c)) && i > 0 && std::islower(static_cast<unsigned char>(s[i - 1])))
      out += '_';
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

py::handle Cached(const char* module, const char* attr) {
  // Looked up once; the objects live as long as the interpreter.
  static std::unordered_map<std::string, PyObject*> cache;
  std::string key = std::string(module) + "." + attr;
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  PyObject* obj = py::object(py::module_::import(module).attr(attr)).release().ptr();
  cache[key] = obj;
  return obj;
}

class PyValueImpl final : public fx::PyValue {
 public:
  explicit PyValueImpl(py::handle o) : obj_(o.ptr()) { Py_INCREF(obj_); }
  ~PyValueImpl() override {
    if (!Py_IsInitialized()) return;
    py::gil_scoped_acquire gil;
    Py_DECREF(obj_);
  }
  std::string repr() const override {
    py::gil_scoped_acquire gil;
    return py::repr(obj_).cast<std::string>();
  }
  const void* identity() const override { return obj_; }
  std::string name_hint() const override {
    py::gil_scoped_acquire gil;
    py::handle h(obj_);
    if (py::hasattr(h, "__name__")) {
      py::object n = h.attr("__name__");
      if (py::isinstance<py::str>(n)) return SnakeCase(n.cast<std::string>());
    }
    return SnakeCase(py::str(py::type::handle_of(h).attr("__name__")).cast<std::string>());
  }
  std::string target_str() const override {
    py::gil_scoped_acquire gil;
    return Cached("kiln.fx._codegen", "pretty_target")(py::handle(obj_)).cast<std::string>();
  }
  PyObject* get() const { return obj_; }

 private:
  PyObject* obj_;
};

bool IsDevice(py::handle o) { return py::isinstance(o, Cached("kiln._device", "device")); }

const Op* OpOfOverload(py::handle o) {
  if (!py::isinstance(o, Cached("kiln._ops", "OpOverload"))) return nullptr;
  return Registry::Get().Find(o.attr("_full_name").cast<std::string>());
}

py::object OverloadObject(const Op* op) {
  static std::unordered_map<const Op*, PyObject*> cache;
  auto it = cache.find(op);
  if (it != cache.end()) return py::reinterpret_borrow<py::object>(it->second);
  // kiln.ops.<namespace>: aten, or a namespace of operators defined in Python (kiln.library)
  const std::string& qualified = op->schema().name;
  py::object ns = py::module_::import("kiln").attr("ops").attr(qualified.substr(0, qualified.find("::")).c_str());
  const std::string& overload = op->schema().overload;
  py::object obj = ns.attr(op->base_name().c_str()).attr(overload.empty() ? "default" : overload.c_str());
  cache[op] = obj.inc_ref().ptr();
  return obj;
}

bool ContainsNode(py::handle o) {
  if (py::isinstance<Node>(o)) return true;
  if (PyTuple_Check(o.ptr()) || PyList_Check(o.ptr())) {
    for (py::handle x : o) if (ContainsNode(x)) return true;
  } else if (PyDict_Check(o.ptr())) {
    for (auto kv : py::reinterpret_borrow<py::dict>(o)) if (ContainsNode(kv.first) || ContainsNode(kv.second)) return true;
  }
  return false;
}

py::object FromConst(const IValue& v) {
  return std::visit([](const auto& x) -> py::object {
    using T = std::decay_t<decltype(x)>;
    if constexpr (std::is_same_v<T, std::monostate>) return py::none();
    else if constexpr (std::is_same_v<T, bool>) return py::bool_(x);
    else if constexpr (std::is_same_v<T, int64_t>) return py::int_(x);
    else if constexpr (std::is_same_v<T, double>) return py::float_(x);
    else if constexpr (std::is_same_v<T, std::string>) return py::str(x);
    else if constexpr (std::is_same_v<T, ScalarType>) return py::reinterpret_borrow<py::object>(DtypeObject(x));
    else if constexpr (std::is_same_v<T, Tensor>) return py::reinterpret_steal<py::object>(WrapTensor(x));
    else if constexpr (std::is_same_v<T, Device>) return Cached("kiln._device", "device")(x.str());
    else if constexpr (std::is_same_v<T, Layout>) return py::reinterpret_borrow<py::object>(Cached("kiln", "strided"));
    else if constexpr (std::is_same_v<T, MemoryFormat>) {
      const char* name = x == MemoryFormat::ChannelsLast ? "channels_last"
                         : x == MemoryFormat::Preserve ? "preserve_format" : "contiguous_format";
      return py::reinterpret_borrow<py::object>(Cached("kiln", name));
    }
    else if constexpr (std::is_same_v<T, SymInt>) {
      if (auto v = x.maybe_as_int()) return py::int_(*v);
      return py::reinterpret_steal<py::object>(SymIntToPython(x));
    }
    else if constexpr (std::is_same_v<T, Generator>) {
      // The same generator state behind a kiln.Generator object.
      py::capsule cap(new Generator(x), "kiln.Generator", [](PyObject* c) {
        delete static_cast<Generator*>(PyCapsule_GetPointer(c, "kiln.Generator"));
      });
      return Cached("kiln", "Generator")(py::arg("_cdata") = cap);
    }
    else if constexpr (std::is_same_v<T, std::vector<SymInt>>) {
      py::list l;
      for (const SymInt& s : x) l.append(FromConst(IValue(s)));
      return l;
    }
    else if constexpr (std::is_same_v<T, std::vector<double>> || std::is_same_v<T, std::vector<bool>>) return py::cast(x);
    else if constexpr (std::is_same_v<T, std::complex<double>>)
      return py::reinterpret_steal<py::object>(PyComplex_FromDoubles(x.real(), x.imag()));
    else if constexpr (std::is_same_v<T, std::vector<Tensor>>) {
      py::list l;
      for (const Tensor& t : x) l.append(py::reinterpret_steal<py::object>(WrapTensor(t)));
      return l;
    }
    else throw TypeError("an fx argument holds a value that has no Python form");
  }, v.variant());
}

Opcode OpcodeArg(const std::string& op) { return fx::OpcodeFromName(op); }

std::vector<Argument> ArgsFrom(py::handle args) {
  std::vector<Argument> out;
  if (args.is_none()) return out;
  if (!PyTuple_Check(args.ptr()) && !PyList_Check(args.ptr()))
    throw TypeError(StrCat("args must be a tuple, got ", py::str(py::type::handle_of(args).attr("__name__")).cast<std::string>()));
  for (py::handle a : args) out.push_back(ToArgument(a));
  return out;
}

Kwargs KwargsFrom(py::handle kwargs) {
  Kwargs out;
  if (kwargs.is_none()) return out;
  if (!PyDict_Check(kwargs.ptr())) throw TypeError("kwargs must be a dict");
  for (auto kv : py::reinterpret_borrow<py::dict>(kwargs)) {
    if (!py::isinstance<py::str>(kv.first)) throw TypeError("kwargs keys must be str");
    out.emplace_back(kv.first.cast<std::string>(), ToArgument(kv.second));
  }
  return out;
}

py::tuple ArgsTo(const std::vector<Argument>& args) {
  py::tuple t(args.size());
  for (size_t i = 0; i < args.size(); ++i) t[i] = FromArgument(args[i]);
  return t;
}

py::dict KwargsTo(const Kwargs& kwargs) {
  py::dict d;
  for (const auto& [k, v] : kwargs) d[py::str(k)] = FromArgument(v);
  return d;
}

// meta values: tensors, SymInts, numbers, strings and tuples of them are visible to C++; anything
// else is kept as the very Python object (so mutable entries stay shared).
Argument ToMetaArgument(py::handle o) {
  PyObject* p = o.ptr();
  if (p == Py_None || PyBool_Check(p) || PyFloat_CheckExact(p) || PyUnicode_CheckExact(p) || IsTensor(p))
    return ToArgument(o);
  if (PyLong_CheckExact(p)) {
    int overflow = 0;
    PyLong_AsLongLongAndOverflow(p, &overflow);
    if (!overflow) return ToArgument(o);
  }
  if (PyTuple_CheckExact(p)) {
    std::vector<Argument> items;
    for (py::handle x : o) items.push_back(ToMetaArgument(x));
    return Argument::Tuple(std::move(items));
  }
  return Argument::Py(MakePyValue(o));
}

Node* CheckAlive(Node* n) {
  if (n->graph() == nullptr) throw Error(StrCat("Node '", n->name(), "' has been erased from its graph"));
  return n;
}

py::object GraphObject(Graph* g) {
  if (g == nullptr) return py::none();
  return py::cast(g, py::return_value_policy::reference);
}

}  // namespace

fx::PyValuePtr MakePyValue(py::handle obj) { return std::make_shared<PyValueImpl>(obj); }

Argument ToArgument(py::handle o) {
  PyObject* p = o.ptr();
  if (p == Py_None) return Argument();
  if (py::isinstance<Node>(o)) return Argument(o.cast<Node*>());
  if (PyBool_Check(p)) return Argument(IValue(p == Py_True));
  if (PyLong_CheckExact(p)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(p, &overflow);
    if (!overflow) return Argument(IValue(static_cast<int64_t>(v)));
    return Argument::Py(MakePyValue(o));
  }
  if (PyFloat_CheckExact(p)) return Argument(IValue(PyFloat_AS_DOUBLE(p)));
  if (PyComplex_CheckExact(p))
    return Argument(IValue(std::complex<double>(PyComplex_RealAsDouble(p), PyComplex_ImagAsDouble(p))));
  if (PyUnicode_CheckExact(p)) return Argument(IValue(o.cast<std::string>()));
  // Tuple/list/dict subclasses (kiln.Size, namedtuples) keep their type unless they hold nodes.
  if (PyTuple_CheckExact(p) || (PyTuple_Check(p) && ContainsNode(o))) {
    std::vector<Argument> items;
    for (py::handle x : o) items.push_back(ToArgument(x));
    return Argument::Tuple(std::move(items));
  }
  if (PyList_CheckExact(p) || (PyList_Check(p) && ContainsNode(o))) {
    std::vector<Argument> items;
    for (py::handle x : o) items.push_back(ToArgument(x));
    return Argument::List(std::move(items));
  }
  if (PyDict_CheckExact(p) || (PyDict_Check(p) && ContainsNode(o))) {
    std::vector<Argument> keys, values;
    for (auto kv : py::reinterpret_borrow<py::dict>(o)) {
      keys.push_back(ToArgument(kv.first));
      values.push_back(ToArgument(kv.second));
    }
    return Argument::Dict(std::move(keys), std::move(values));
  }
  if (PySlice_Check(p)) {
    auto* s = reinterpret_cast<PySliceObject*>(p);
    return Argument::Slice(ToArgument(s->start), ToArgument(s->stop), ToArgument(s->step));
  }
  if (IsDtype(p)) return Argument(IValue(reinterpret_cast<PyDtype*>(p)->scalar_type));
  if (IsTensor(p)) return Argument(IValue(UnpackTensor(p)));
  return Argument::Py(MakePyValue(o));
}

py::object FromArgument(const Argument& a) {
  switch (a.kind) {
    case Argument::Kind::kNone: return py::none();
    case Argument::Kind::kNode: return NodeObject(a.node);
    case Argument::Kind::kConst: return FromConst(a.value);
    case Argument::Kind::kPy: return py::reinterpret_borrow<py::object>(static_cast<const PyValueImpl*>(a.py.get())->get());
    case Argument::Kind::kTuple: {
      py::tuple t(a.items.size());
      for (size_t i = 0; i < a.items.size(); ++i) t[i] = FromArgument(a.items[i]);
      return t;
    }
    case Argument::Kind::kList: {
      py::list l;
      for (const Argument& x : a.items) l.append(FromArgument(x));
      return l;
    }
    case Argument::Kind::kDict: {
      py::dict d;
      for (size_t i = 0; i < a.items.size(); ++i) d[FromArgument(a.keys[i])] = FromArgument(a.items[i]);
      return d;
    }
    case Argument::Kind::kSlice:
      return py::reinterpret_steal<py::object>(PySlice_New(FromArgument(a.items[0]).ptr(), FromArgument(a.items[1]).ptr(),
                                                           FromArgument(a.items[2]).ptr()));
  }
  return py::none();
}

Target ToTarget(Opcode op, py::handle target) {
  if (op == Opcode::kCallFunction) {
    if (py::isinstance<py::str>(target))
      throw TypeError(StrCat("call_function target must be a callable, got the str '", target.cast<std::string>(), "'"));
    if (!PyCallable_Check(target.ptr()))
      throw TypeError(StrCat("call_function target must be a callable, got ",
                             py::str(py::type::handle_of(target).attr("__name__")).cast<std::string>()));
    return Target::Callable(MakePyValue(target), OpOfOverload(target));
  }
  if (!py::isinstance<py::str>(target))
    throw TypeError(StrCat(fx::OpcodeName(op), " target must be a str, got ",
                           py::str(py::type::handle_of(target).attr("__name__")).cast<std::string>()));
  return Target(target.cast<std::string>());
}

py::object FromTarget(const Target& t) {
  if (t.py) return py::reinterpret_borrow<py::object>(static_cast<const PyValueImpl*>(t.py.get())->get());
  if (t.op) return OverloadObject(t.op);
  return py::str(t.name);
}

py::object NodeObject(Node* n) { return py::cast(n->shared_from_this()); }

py::object WrapGraph(std::shared_ptr<Graph> graph) {
  py::object cls = py::module_::import("kiln.fx.graph").attr("Graph");
  return cls.attr("_from_cpp")(py::capsule(new std::shared_ptr<Graph>(std::move(graph)),
                                           [](void* p) { delete static_cast<std::shared_ptr<Graph>*>(p); }));
}

std::shared_ptr<Graph> UnwrapGraph(py::handle graph) {
  if (!py::isinstance<Graph>(graph)) throw TypeError("expected a kiln.fx.Graph");
  return graph.cast<std::shared_ptr<Graph>>();
}

// An IValue as the Python value an OpOverload takes for it.
py::object IValueToPython(const IValue& v) {
  if (v.is_tensor()) {
    const Tensor& t = v.to_tensor();
    if (!t.defined()) return py::none();
    return py::reinterpret_steal<py::object>(WrapTensor(t));
  }
  if (v.is_tensor_list()) {
    py::list l;
    for (const Tensor& t : v.to_tensor_list()) l.append(py::reinterpret_steal<py::object>(WrapTensor(t)));
    return std::move(l);
  }
  if (v.is_optional_tensor_list()) {
    py::list l;
    for (const auto& t : v.to_optional_tensor_list())
      l.append(t && t->defined() ? py::reinterpret_steal<py::object>(WrapTensor(*t)) : py::none());
    return std::move(l);
  }
  if (v.is_symint()) {
    const SymInt& s = v.to_symint();
    if (auto c = s.maybe_as_int()) return py::int_(*c);
  }
  if (std::holds_alternative<std::vector<SymInt>>(v.variant())) {
    py::list l;
    for (const SymInt& s : v.to_symint_list()) l.append(IValueToPython(IValue(s)));
    return std::move(l);
  }
  return FromArgument(fx::Argument(v));
}

void InitFxBindings(py::module_& parent) {
  py::module_ m = parent.def_submodule("_fx", "FX graphs in C++ (fx/graph.h)");

  py::class_<Node, std::shared_ptr<Node>>(m, "Node")
      .def_property("name", &Node::name, [](Node& n, const std::string& name) { CheckAlive(&n)->SetName(name); })
      .def_property_readonly("op", [](Node& n) { return std::string(fx::OpcodeName(n.op())); })
      .def_property("target", [](Node& n) { return FromTarget(n.target()); },
                    [](Node& n, py::handle t) { n.set_target(ToTarget(n.op(), t)); })
      .def_property("args", [](Node& n) { return ArgsTo(n.args()); },
                    [](Node& n, py::handle a) { CheckAlive(&n)->SetArgs(ArgsFrom(a)); })
      .def_property("kwargs", [](Node& n) { return KwargsTo(n.kwargs()); },
                    [](Node& n, py::handle k) { CheckAlive(&n)->SetKwargs(KwargsFrom(k)); })
      .def_property_readonly("users", [](Node& n) {
        py::dict d;  // PyTorch's users is a dict {user: None}, in insertion order
        for (Node* u : n.users()) d[NodeObject(u)] = py::none();
        return d;
      })
      .def_property_readonly("_num_users", [](Node& n) { return n.users().size(); },
                             "len(node.users), without making the dict (Inductor asks for every node)")
      .def_property_readonly("all_input_nodes", [](Node& n) {
        py::list l;
        for (Node* in : n.AllInputNodes()) l.append(NodeObject(in));
        return l;
      })
      .def_property_readonly("graph", [](Node& n) { return GraphObject(n.graph()); })
      .def_property_readonly("next", [](Node& n) { return n.next() ? NodeObject(n.next()) : py::none(); })
      .def_property_readonly("prev", [](Node& n) { return n.prev() ? NodeObject(n.prev()) : py::none(); })
      .def_property_readonly("_erased", &Node::erased)
      .def_property("type", [](Node& n) -> py::object {
        return n.type ? py::reinterpret_borrow<py::object>(static_cast<const PyValueImpl*>(n.type.get())->get()) : py::none();
      }, [](Node& n, py::handle t) { n.type = t.is_none() ? nullptr : MakePyValue(t); })
      .def("prepend", [](Node& n, Node* x) { CheckAlive(&n)->Prepend(x); }, py::arg("x"))
      .def("append", [](Node& n, Node* x) { CheckAlive(&n)->Append(x); }, py::arg("x"))
      .def("_replace_all_uses_with", [](Node& n, Node* replacement, py::object filter) {
        std::function<bool(Node*)> f;
        if (!filter.is_none()) f = [filter](Node* u) { return filter(NodeObject(u)).cast<bool>(); };
        std::vector<Node*> changed = CheckAlive(&n)->ReplaceAllUsesWith(replacement, f);
        py::list l;
        for (Node* u : changed) l.append(NodeObject(u));
        return l;
      })
      .def("replace_input_with", [](Node& n, Node* old_input, Node* new_input) {
        CheckAlive(&n)->ReplaceInputWith(old_input, new_input);
      }, py::arg("old_input"), py::arg("new_input"))
      .def("update_arg", [](Node& n, size_t idx, py::handle arg) { CheckAlive(&n)->UpdateArg(idx, ToArgument(arg)); },
           py::arg("idx"), py::arg("arg"))
      .def("update_kwarg", [](Node& n, const std::string& key, py::handle arg) {
        CheckAlive(&n)->UpdateKwarg(key, ToArgument(arg));
      }, py::arg("key"), py::arg("arg"))
      .def("_is_impure_op", &Node::IsImpure)
      .def("_format", &Node::Format)
      .def("_meta_keys", [](Node& n) {
        std::vector<std::string> keys;
        for (const auto& [k, v] : n.meta()) keys.push_back(k);
        return keys;
      })
      .def("_meta_get", [](Node& n, const std::string& key) {
        const Argument* a = n.FindMeta(key);
        if (!a) throw py::key_error(key);
        return FromArgument(*a);
      })
      // meta.get(key, default) and `key in meta` in one call each (no list of keys, no exception)
      .def("_meta_get_or", [](Node& n, const std::string& key, py::object fallback) -> py::object {
        const Argument* a = n.FindMeta(key);
        return a ? FromArgument(*a) : fallback;
      })
      .def("_meta_has", [](Node& n, const std::string& key) { return n.FindMeta(key) != nullptr; })
      .def("_meta_set", [](Node& n, const std::string& key, py::handle v) { n.SetMeta(key, ToMetaArgument(v)); })
      .def("_meta_del", [](Node& n, const std::string& key) {
        auto& m = n.meta();
        for (auto it = m.begin(); it != m.end(); ++it)
          if (it->first == key) { m.erase(it); return; }
        throw py::key_error(key);
      })
      .def("__repr__", &Node::name);

  py::class_<Graph, std::shared_ptr<Graph>>(m, "GraphBase")
      .def(py::init<>())
      .def(py::init([](py::capsule handle) {
        return *static_cast<std::shared_ptr<Graph>*>(handle.get_pointer());
      }))
      .def("_nodes", [](Graph& g) {
        py::list l;
        for (Node* n : g.nodes()) l.append(NodeObject(n));
        return l;
      })
      .def("_len", &Graph::size)
      .def("_order_version", &Graph::order_version)
      .def("_root", [](Graph& g) { return NodeObject(g.root()); })
      .def("_find_node", [](Graph& g, const std::string& name) -> py::object {
        Node* n = g.FindNode(name);
        return n ? NodeObject(n) : py::none();
      })
      .def("create_node", [](Graph& g, const std::string& op, py::handle target, py::handle args, py::handle kwargs,
                             py::object name, py::object type_expr) {
        Opcode code = OpcodeArg(op);
        Node* n = g.CreateNode(code, ToTarget(code, target), ArgsFrom(args), KwargsFrom(kwargs),
                               name.is_none() ? "" : name.cast<std::string>());
        if (!type_expr.is_none()) n->type = MakePyValue(type_expr);
        return NodeObject(n);
      }, py::arg("op"), py::arg("target"), py::arg("args") = py::none(), py::arg("kwargs") = py::none(),
         py::arg("name") = py::none(), py::arg("type_expr") = py::none())
      .def("_insert_point", [](Graph& g) -> py::object {
        Node* n = g.insert_point().node;
        return n && n != g.root() ? NodeObject(n) : py::none();
      })
      .def("_set_insert_point", [](Graph& g, py::object before) {
        if (before.is_none()) g.set_insert_point({nullptr});
        else g.InsertingBefore(before.cast<Node*>());
      })
      .def("erase_node", [](Graph& g, Node* n) { g.EraseNode(n); }, py::arg("to_erase"))
      .def("_eliminate_dead_code", [](Graph& g, py::object is_impure) {
        return g.EliminateDeadCode([&](const Node* n) {
          return is_impure(NodeObject(const_cast<Node*>(n))).cast<bool>();
        });
      })
      .def("lint", &Graph::Lint)
      .def("_node_copy", [](Graph& g, Node* n, py::object arg_transform) {
        std::function<Argument(Node*)> f = [&](Node* in) { return ToArgument(arg_transform(NodeObject(in))); };
        return NodeObject(g.NodeCopy(n, f));
      })
      .def("_graph_copy", [](Graph& g, std::shared_ptr<Graph> other, py::dict val_map) {
        std::unordered_map<const Node*, Node*> map;
        for (auto kv : val_map)
          if (py::isinstance<Node>(kv.first) && py::isinstance<Node>(kv.second))
            map[kv.first.cast<Node*>()] = kv.second.cast<Node*>();
        Argument out = g.GraphCopy(*other, map);
        for (auto& [from, to] : map) val_map[NodeObject(const_cast<Node*>(from))] = NodeObject(to);
        return FromArgument(out);
      })
      .def("__str__", &Graph::str);

  m.def("_set_reserved_names", [](std::vector<std::string> names) { Graph::SetReservedNames(std::move(names)); });
  InitInterpreterBindings(m);
}

}  // namespace kiln::python
