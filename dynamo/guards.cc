// dynamo/guards.cc: the guard tree's accessors, leaf guards, check and printer
// (Note [Guard tree] in guards.h).
#include "dynamo/guards.h"

#include <map>

#include "autograd/grad_mode.h"
#include "runtime/error.h"
#include "tensor/scalar_type.h"

namespace kiln::dynamo {
namespace {

TensorUnwrapper g_tensor_unwrapper = nullptr;
GuardManagerUnwrapper g_manager_unwrapper = nullptr;

// --- small Python helpers ------------------------------------------------------------------------

// repr(o) as UTF-8, shortened to `max` characters; errors are cleared.
std::string Repr(PyObject* o, size_t max = 80) {
  PyObject* r = PyObject_Repr(o);
  if (!r) {
    PyErr_Clear();
    return std::string("<") + Py_TYPE(o)->tp_name + " object>";
  }
  const char* s = PyUnicode_AsUTF8(r);
  std::string out = s ? s : "?";
  if (!s) PyErr_Clear();
  Py_DECREF(r);
  if (out.size() > max) out = out.substr(0, max - 3) + "...";
  return out;
}

std::string TypeName(PyTypeObject* t) { return t->tp_name; }
std::string TypeName(PyObject* o) { return TypeName(Py_TYPE(o)); }

// A new reference to `o`, interned when it is an exact str (dict lookups and key comparisons of
// interned strings succeed on the pointer).
PyObject* InternedRef(PyObject* o) {
  Py_INCREF(o);
  if (PyUnicode_CheckExact(o)) PyUnicode_InternInPlace(&o);
  return o;
}

// a == b for keys: pointer first, then __eq__ of equal types (errors count as different).
bool SameKey(PyObject* a, PyObject* b) {
  if (a == b) return true;
  if (Py_TYPE(a) != Py_TYPE(b)) return false;
  int r = PyObject_RichCompareBool(a, b, Py_EQ);
  if (r < 0) PyErr_Clear();
  return r == 1;
}

[[noreturn]] void ThrowTypeErrorFromPython(const std::string& what) {
  PyErr_Clear();
  throw TypeError(what);
}

// --- accessors ------------------------------------------------------------------------------------

class DictGetItemAccessor : public GuardAccessor {
 public:
  explicit DictGetItemAccessor(PyObject* key) : key_(InternedRef(key)) {}
  ~DictGetItemAccessor() override { Py_DECREF(key_); }
  Kind kind() const override { return Kind::kDictGetItem; }
  PyObject* key() const { return key_; }
  PyObject* Access(PyObject* parent, CheckState& state) const override {
    if (!PyDict_Check(parent)) {
      if (state.detail) *state.detail = "expected a dict, got " + TypeName(parent);
      return nullptr;
    }
    PyObject* v = PyDict_GetItemWithError(parent, key_);  // borrowed
    if (!v) {
      PyErr_Clear();
      if (state.detail) *state.detail = "key " + dynamo::Repr(key_) + " missing";
      return nullptr;
    }
    Py_INCREF(v);  // a guard below may run Python that changes the dict
    return v;
  }
  std::string Repr() const override { return "DictGetItemGuardAccessor(" + dynamo::Repr(key_) + ")"; }

 private:
  PyObject* key_;
};

class GetAttrAccessor : public GuardAccessor {
 public:
  explicit GetAttrAccessor(PyObject* name) : name_(InternedRef(name)) {}
  ~GetAttrAccessor() override { Py_DECREF(name_); }
  Kind kind() const override { return Kind::kGetAttr; }
  PyObject* name() const { return name_; }
  PyObject* Access(PyObject* parent, CheckState& state) const override {
    PyObject* v = PyObject_GetAttr(parent, name_);
    if (!v) {
      PyErr_Clear();
      if (state.detail) *state.detail = TypeName(parent) + " object has no attribute " + dynamo::Repr(name_);
    }
    return v;
  }
  std::string Repr() const override { return "GetAttrGuardAccessor(" + std::string(PyUnicode_AsUTF8(name_)) + ")"; }

 private:
  PyObject* name_;
};

class GetItemAccessor : public GuardAccessor {
 public:
  explicit GetItemAccessor(Py_ssize_t index) : index_(index) {}
  Kind kind() const override { return Kind::kGetItem; }
  Py_ssize_t index() const { return index_; }
  PyObject* Access(PyObject* parent, CheckState& state) const override {
    PyObject* v = nullptr;
    if (PyTuple_Check(parent)) {
      if (index_ < PyTuple_GET_SIZE(parent)) v = PyTuple_GET_ITEM(parent, index_);
    } else if (PyList_Check(parent)) {
      if (index_ < PyList_GET_SIZE(parent)) v = PyList_GET_ITEM(parent, index_);
    } else {
      v = PySequence_GetItem(parent, index_);  // new reference
      if (!v) PyErr_Clear();
      if (!v && state.detail) *state.detail = "cannot index " + TypeName(parent) + " at " + std::to_string(index_);
      return v;
    }
    if (!v) {
      if (state.detail) *state.detail = "index " + std::to_string(index_) + " out of range for " + TypeName(parent);
      return nullptr;
    }
    Py_INCREF(v);
    return v;
  }
  std::string Repr() const override { return "GetItemGuardAccessor(" + std::to_string(index_) + ")"; }

 private:
  Py_ssize_t index_;
};

// The globals dict captured by the root (the parent's value is not read).
class GlobalsAccessor : public GuardAccessor {
 public:
  explicit GlobalsAccessor(const RootGuardManager* root) : root_(root) {}
  Kind kind() const override { return Kind::kGlobals; }
  PyObject* Access(PyObject*, CheckState&) const override {
    Py_INCREF(root_->f_globals());
    return root_->f_globals();
  }
  std::string Repr() const override { return "GlobalsGuardAccessor"; }

 private:
  const RootGuardManager* root_;
};

bool SameAccessor(const GuardAccessor& a, const GuardAccessor& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case GuardAccessor::Kind::kDictGetItem:
      return SameKey(static_cast<const DictGetItemAccessor&>(a).key(), static_cast<const DictGetItemAccessor&>(b).key());
    case GuardAccessor::Kind::kGetAttr:
      return SameKey(static_cast<const GetAttrAccessor&>(a).name(), static_cast<const GetAttrAccessor&>(b).name());
    case GuardAccessor::Kind::kGetItem:
      return static_cast<const GetItemAccessor&>(a).index() == static_cast<const GetItemAccessor&>(b).index();
    case GuardAccessor::Kind::kGlobals:
      return true;
  }
  return false;
}

// --- leaf guards ------------------------------------------------------------------------------------

class TypeMatchGuard : public LeafGuard {
 public:
  TypeMatchGuard(PyObject* type, const std::string& source, const std::string& origin)
      : LeafGuard("TYPE_MATCH: type(" + source + ") is " + TypeName(reinterpret_cast<PyTypeObject*>(type)), origin),
        type_(type) {
    Py_INCREF(type_);
  }
  ~TypeMatchGuard() override { Py_DECREF(type_); }
  bool Check(PyObject* v, CheckState& state) const override {
    if (reinterpret_cast<PyObject*>(Py_TYPE(v)) == type_) return true;
    if (state.detail) *state.detail = "type is " + TypeName(v);
    return false;
  }

 private:
  PyObject* type_;
};

class IdMatchGuard : public LeafGuard {
 public:
  IdMatchGuard(PyObject* obj, const std::string& source, const std::string& origin)
      : LeafGuard("ID_MATCH: " + source + " is " + Repr(obj, 60), origin), obj_(obj) {
    Py_INCREF(obj_);
  }
  ~IdMatchGuard() override { Py_DECREF(obj_); }
  bool Check(PyObject* v, CheckState& state) const override {
    if (v == obj_) return true;
    if (state.detail) *state.detail = "value is " + Repr(v, 60);
    return false;
  }

 private:
  PyObject* obj_;
};

class EqualsMatchGuard : public LeafGuard {
 public:
  EqualsMatchGuard(PyObject* value, const std::string& source, const std::string& origin)
      : LeafGuard("EQUALS_MATCH: " + source + " == " + Repr(value), origin), value_(value) {
    Py_INCREF(value_);
  }
  ~EqualsMatchGuard() override { Py_DECREF(value_); }
  bool Check(PyObject* v, CheckState& state) const override {
    if (v == value_) return true;
    if (Py_TYPE(v) == Py_TYPE(value_)) {
      int r = PyObject_RichCompareBool(v, value_, Py_EQ);
      if (r == 1) return true;
      if (r < 0) PyErr_Clear();
    }
    if (state.detail) *state.detail = "value is " + Repr(v) + " (" + TypeName(v) + ")";
    return false;
  }

 private:
  PyObject* value_;
};

class LengthCheckGuard : public LeafGuard {
 public:
  LengthCheckGuard(Py_ssize_t n, const std::string& source, const std::string& origin)
      : LeafGuard("LENGTH_CHECK: len(" + source + ") == " + std::to_string(n), origin), n_(n) {}
  bool Check(PyObject* v, CheckState& state) const override {
    Py_ssize_t n;
    if (PyTuple_Check(v)) n = PyTuple_GET_SIZE(v);
    else if (PyList_Check(v)) n = PyList_GET_SIZE(v);
    else if (PyDict_Check(v)) n = PyDict_GET_SIZE(v);
    else n = PyObject_Length(v);
    if (n == n_) return true;
    if (n < 0) PyErr_Clear();
    if (state.detail) *state.detail = n < 0 ? TypeName(v) + " has no len()" : "length is " + std::to_string(n);
    return false;
  }

 private:
  Py_ssize_t n_;
};

class DictKeysGuard : public LeafGuard {
 public:
  // keys: a tuple (stolen), its str items interned.
  DictKeysGuard(PyObject* keys, const std::string& source, const std::string& origin)
      : LeafGuard("DICT_KEYS: list(" + source + ".keys()) == " + KeysRepr(keys), origin), keys_(keys) {}
  ~DictKeysGuard() override { Py_DECREF(keys_); }
  bool Check(PyObject* v, CheckState& state) const override {
    if (!PyDict_Check(v)) {
      if (state.detail) *state.detail = "expected a dict, got " + TypeName(v);
      return false;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(keys_);
    if (PyDict_GET_SIZE(v) != n) {
      if (state.detail) *state.detail = "the dict has " + std::to_string(PyDict_GET_SIZE(v)) + " keys";
      return false;
    }
    Py_ssize_t pos = 0, i = 0;
    PyObject *key, *value;
    while (PyDict_Next(v, &pos, &key, &value)) {
      if (!SameKey(key, PyTuple_GET_ITEM(keys_, i))) {
        if (state.detail) *state.detail = "key " + std::to_string(i) + " is " + Repr(key);
        return false;
      }
      ++i;
    }
    return true;
  }

 private:
  static std::string KeysRepr(PyObject* keys) {
    std::string s = "[";
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keys); ++i) s += (i ? ", " : "") + Repr(PyTuple_GET_ITEM(keys, i), 40);
    return s + "]";
  }
  PyObject* keys_;
};

std::string KeySetRepr(DispatchKeySet keys) {
  std::string s = "DispatchKeySet(";
  bool first = true;
  for (int k = 1; k < kNumDispatchKeys; ++k) {
    if (!keys.has(static_cast<DispatchKey>(k))) continue;
    s += (first ? "" : ", ") + std::string(DispatchKeyName(static_cast<DispatchKey>(k)));
    first = false;
  }
  return s + ")";
}

// One dimension's size: exact, or the shape symbol with index `symbol` (bound at check time).
// An expected size or stride: exact (symbol < 0) or a symbol's index in the root's table.
struct DimSize {
  int64_t value = 0;
  int symbol = -1;
};

// An expected stride: a DimSize, or derived from the actual sizes and strides.
struct DimStride {
  enum class Kind { kExact, kContiguous, kStrideTimesSize } kind = Kind::kExact;
  DimSize exact;    // kExact
  int of_dim = -1;  // kStrideTimesSize
};

class TensorMatchGuard : public LeafGuard {
 public:
  TensorMatchGuard(std::string text, const std::string& origin, PyObject* type, const Tensor& example,
                   std::vector<DimSize> sizes, std::vector<DimStride> strides, const RootGuardManager* root)
      : LeafGuard(std::move(text), origin),
        type_(type),
        dtype_(example.dtype()),
        device_(example.device()),
        keys_(example->keys()),
        requires_grad_(example->requires_grad()),
        sizes_(std::move(sizes)),
        strides_(std::move(strides)),
        root_(root) {
    Py_INCREF(type_);
  }
  ~TensorMatchGuard() override { Py_DECREF(type_); }

  bool Check(PyObject* v, CheckState& state) const override {
    if (reinterpret_cast<PyObject*>(Py_TYPE(v)) != type_) return Fail(state, "type is " + TypeName(v));
    TensorUnwrapper unwrap = g_tensor_unwrapper;
    const Tensor* t = unwrap ? unwrap(v) : nullptr;
    if (!t || !t->defined()) return Fail(state, "not a tensor");
    const TensorImpl& impl = *t->impl();
    if (impl.dtype() != dtype_) return Fail(state, std::string("dtype is ") + ScalarTypeName(impl.dtype()));
    if (impl.device() != device_) return Fail(state, "device is " + impl.device().str());
    if (impl.requires_grad() != requires_grad_)
      return Fail(state, std::string("requires_grad is ") + (impl.requires_grad() ? "True" : "False"));
    if (!(impl.keys() == keys_)) return Fail(state, "dispatch keys are " + KeySetRepr(impl.keys()));
    const size_t ndim = sizes_.size();
    if (impl.dim() != static_cast<int64_t>(ndim)) return Fail(state, "dim is " + std::to_string(impl.dim()));
    const SymDimVector& sym_sizes = impl.sym_sizes();
    const SymDimVector& sym_strides = impl.sym_strides();
    DimVector sizes(ndim), strides(ndim);  // inline storage: guards run on every call
    for (size_t d = 0; d < ndim; ++d) {
      std::optional<int64_t> size = sym_sizes[d].maybe_as_int(), stride = sym_strides[d].maybe_as_int();
      if (!size) return Fail(state, "size " + std::to_string(d) + " is symbolic");
      if (!stride) return Fail(state, "stride " + std::to_string(d) + " is symbolic");
      sizes[d] = *size;
      strides[d] = *stride;
    }
    for (size_t d = 0; d < ndim; ++d)
      if (!Match(sizes_[d], sizes[d], "size", d, state)) return false;
    int64_t contiguous = 1;
    for (size_t i = ndim; i-- > 0;) {
      const DimStride& want = strides_[i];
      if (want.kind == DimStride::Kind::kExact) {
        if (!Match(want.exact, strides[i], "stride", i, state)) return false;
      } else {
        const int64_t expected = want.kind == DimStride::Kind::kContiguous
                                     ? contiguous
                                     : strides[want.of_dim] * sizes[want.of_dim];
        if (strides[i] != expected)
          return Fail(state, "stride mismatch at index " + std::to_string(i) + ": expected " + std::to_string(expected) +
                                 ", actual " + std::to_string(strides[i]));
      }
      contiguous *= sizes[i];
    }
    return true;
  }

 private:
  // An exact value must be equal; a symbol binds to the value, or must equal its earlier binding.
  bool Match(const DimSize& want, int64_t actual, const char* what, size_t d, CheckState& state) const {
    const std::string at = std::string(what) + " mismatch at index " + std::to_string(d);
    if (want.symbol < 0) {
      if (actual != want.value)
        return Fail(state, at + ": expected " + std::to_string(want.value) + ", actual " + std::to_string(actual));
    } else if (state.symbol_bound[want.symbol]) {
      if (state.symbol_values[want.symbol] != actual)
        return Fail(state, std::string(what) + " " + std::to_string(d) + " is " + std::to_string(actual) + ", but " +
                               root_->symbols()[want.symbol] + " = " + std::to_string(state.symbol_values[want.symbol]) +
                               " from an earlier guard");
    } else {
      state.symbol_bound[want.symbol] = true;
      state.symbol_values[want.symbol] = actual;
    }
    return true;
  }

  static bool Fail(CheckState& state, const std::string& why) {
    if (state.detail) *state.detail = why;
    return false;
  }
  PyObject* type_;
  ScalarType dtype_;
  Device device_;
  DispatchKeySet keys_;
  bool requires_grad_;
  std::vector<DimSize> sizes_;
  std::vector<DimStride> strides_;
  const RootGuardManager* root_;
};

class GlobalStateGuard : public LeafGuard {
 public:
  explicit GlobalStateGuard(const std::string& origin)
      : LeafGuard(Text(autograd::GradMode::is_enabled(), GetDefaultDtype()), origin),
        grad_mode_(autograd::GradMode::is_enabled()),
        default_dtype_(GetDefaultDtype()) {}
  bool Check(PyObject*, CheckState& state) const override {
    bool grad = autograd::GradMode::is_enabled();
    ScalarType dtype = GetDefaultDtype();
    if (grad == grad_mode_ && dtype == default_dtype_) return true;
    if (state.detail) *state.detail = "now " + Text(grad, dtype).substr(sizeof("GLOBAL_STATE: ") - 1);
    return false;
  }

 private:
  static std::string Text(bool grad, ScalarType dtype) {
    return std::string("GLOBAL_STATE: grad_mode=") + (grad ? "True" : "False") + ", default_dtype=kiln." +
           ScalarTypeName(dtype);
  }
  bool grad_mode_;
  ScalarType default_dtype_;
};

std::string CallableName(PyObject* fn) {
  for (const char* attr : {"__name__", "__qualname__"}) {
    PyObject* n = PyObject_GetAttrString(fn, attr);
    if (n && PyUnicode_Check(n)) {
      std::string s = PyUnicode_AsUTF8(n);
      Py_DECREF(n);
      return s;
    }
    Py_XDECREF(n);
    PyErr_Clear();
  }
  return TypeName(fn);
}

class LambdaGuard : public LeafGuard {
 public:
  LambdaGuard(PyObject* fn, const std::string& source, const std::string& origin)
      : LeafGuard("LAMBDA_GUARD: " + CallableName(fn) + "(" + source + ")", origin), fn_(fn) {
    Py_INCREF(fn_);
  }
  ~LambdaGuard() override { Py_DECREF(fn_); }
  bool Check(PyObject* v, CheckState& state) const override {
    PyObject* r = PyObject_CallOneArg(fn_, v);
    int truth = r ? PyObject_IsTrue(r) : -1;
    Py_XDECREF(r);
    if (truth == 1) return true;
    if (truth < 0) {
      if (state.detail) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        *state.detail = std::string("raised ") + (type ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "?");
        if (PyObject* msg = value ? PyObject_Str(value) : nullptr) {
          if (const char* m = PyUnicode_AsUTF8(msg)) *state.detail += std::string(": ") + m;
          Py_DECREF(msg);
        }
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
      }
      PyErr_Clear();
    } else if (state.detail) {
      *state.detail = "returned a false value";
    }
    return false;
  }

 private:
  PyObject* fn_;
};

// "text -- detail  # origin"
std::string Describe(const std::string& text, const std::string& detail, const std::string& origin) {
  std::string s = text;
  if (!detail.empty()) s += " -- " + detail;
  if (!origin.empty()) s += "  # " + origin;
  return s;
}

std::string Indent(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "| ";
  return s + "+- ";
}

}  // namespace

void SetTensorUnwrapper(TensorUnwrapper fn) { g_tensor_unwrapper = fn; }
TensorUnwrapper GetTensorUnwrapper() { return g_tensor_unwrapper; }
void SetGuardManagerUnwrapper(GuardManagerUnwrapper fn) { g_manager_unwrapper = fn; }
RootGuardManager* AsRootGuardManager(PyObject* guard) {
  return g_manager_unwrapper ? g_manager_unwrapper(guard) : nullptr;
}

// --- GuardManager -------------------------------------------------------------------------------------

GuardManager::GuardManager(RootGuardManager* root, std::string source, std::unique_ptr<GuardAccessor> accessor)
    : root_(root), source_(std::move(source)), accessor_(std::move(accessor)) {}

GuardManager::~GuardManager() = default;

GuardManager* GuardManager::Child(std::unique_ptr<GuardAccessor> accessor, const std::string& source) {
  for (auto& child : children_)
    if (SameAccessor(*child->accessor_, *accessor)) return child.get();
  children_.push_back(std::unique_ptr<GuardManager>(new GuardManager(root_, source, std::move(accessor))));
  return children_.back().get();
}

GuardManager* GuardManager::DictGetItemManager(PyObject* key, const std::string& source) {
  if (PyObject_Hash(key) == -1) ThrowTypeErrorFromPython("dict_getitem_manager: unhashable key of type " + TypeName(key));
  return Child(std::make_unique<DictGetItemAccessor>(key), source);
}

GuardManager* GuardManager::GetAttrManager(PyObject* name, const std::string& source) {
  KILN_CHECK_TYPE(PyUnicode_Check(name), "getattr_manager: the attribute name must be a str, got ", TypeName(name));
  return Child(std::make_unique<GetAttrAccessor>(name), source);
}

GuardManager* GuardManager::GetItemManager(Py_ssize_t index, const std::string& source) {
  KILN_CHECK_VALUE(index >= 0, "getitem_manager: the index must be >= 0, got ", index);
  return Child(std::make_unique<GetItemAccessor>(index), source);
}

void GuardManager::AddTypeMatchGuard(PyObject* type, const std::string& origin) {
  KILN_CHECK_TYPE(PyType_Check(type), "add_type_match_guard: expected a type, got ", TypeName(type));
  AddLeaf(std::make_unique<TypeMatchGuard>(type, source_, origin));
}

void GuardManager::AddIdMatchGuard(PyObject* obj, const std::string& origin) {
  AddLeaf(std::make_unique<IdMatchGuard>(obj, source_, origin));
}

void GuardManager::AddEqualsMatchGuard(PyObject* value, const std::string& origin) {
  AddLeaf(std::make_unique<EqualsMatchGuard>(value, source_, origin));
}

void GuardManager::AddLengthCheckGuard(Py_ssize_t n, const std::string& origin) {
  KILN_CHECK_VALUE(n >= 0, "add_length_check_guard: the length must be >= 0, got ", n);
  AddLeaf(std::make_unique<LengthCheckGuard>(n, source_, origin));
}

void GuardManager::AddDictKeysGuard(PyObject* keys, const std::string& origin) {
  PyObject* tuple = PySequence_Tuple(keys);
  if (!tuple) ThrowTypeErrorFromPython("add_dict_keys_guard: expected a sequence of keys, got " + TypeName(keys));
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); ++i) {
    PyObject* k = PyTuple_GET_ITEM(tuple, i);
    if (PyObject_Hash(k) == -1) {
      Py_DECREF(tuple);
      ThrowTypeErrorFromPython("add_dict_keys_guard: unhashable key of type " + TypeName(k));
    }
    if (PyUnicode_CheckExact(k)) {
      PyObject* interned = InternedRef(k);
      PyTuple_SET_ITEM(tuple, i, interned);  // the tuple is new: replacing its item is safe
      Py_DECREF(k);
    }
  }
  AddLeaf(std::make_unique<DictKeysGuard>(tuple, source_, origin));
}

void GuardManager::AddTensorMatchGuard(PyObject* example, const std::vector<SizeSpec>& sizes,
                                       const std::vector<StrideSpec>& strides, const std::string& origin) {
  const Tensor* t = g_tensor_unwrapper ? g_tensor_unwrapper(example) : nullptr;
  KILN_CHECK_TYPE(t && t->defined(), "add_tensor_match_guard: expected a tensor example, got ", TypeName(example));
  KILN_CHECK_VALUE(static_cast<int64_t>(sizes.size()) == t->dim() && static_cast<int64_t>(strides.size()) == t->dim(),
                   "add_tensor_match_guard: the example has ", t->dim(), " dims, but ", sizes.size(), " sizes and ",
                   strides.size(), " strides were given");
  auto exact_or_symbol = [&](const SizeSpec& s, std::string* text) {
    DimSize d;
    *text += text->empty() ? "" : ", ";
    if (const auto* v = std::get_if<int64_t>(&s)) {
      d.value = *v;
      *text += std::to_string(*v);
    } else {
      const std::string& name = std::get<std::string>(s);
      KILN_CHECK_VALUE(!name.empty(), "add_tensor_match_guard: a symbol name must not be empty");
      d.symbol = root_->SymbolIndex(name);
      *text += name;
    }
    return d;
  };
  std::vector<DimSize> dims;
  std::vector<DimStride> dim_strides;
  std::string size_text, stride_text;
  for (const SizeSpec& s : sizes) dims.push_back(exact_or_symbol(s, &size_text));
  for (const StrideSpec& s : strides) {
    DimStride d;
    if (std::holds_alternative<ContiguousStride>(s)) {
      d.kind = DimStride::Kind::kContiguous;
      stride_text += std::string(stride_text.empty() ? "" : ", ") + "None";
    } else if (const auto* of = std::get_if<StrideTimesSize>(&s)) {
      KILN_CHECK_VALUE(of->dim >= 0 && of->dim < t->dim() && of->dim != static_cast<int>(dim_strides.size()),
                       "add_tensor_match_guard: stride ", dim_strides.size(), " derives from dim ", of->dim,
                       ", which is not another dim of the ", t->dim(), "-dim example");
      d.kind = DimStride::Kind::kStrideTimesSize;
      d.of_dim = of->dim;
      const std::string j = std::to_string(of->dim);
      stride_text += std::string(stride_text.empty() ? "" : ", ") + "stride[" + j + "]*size[" + j + "]";
    } else {
      d.exact = exact_or_symbol(std::holds_alternative<int64_t>(s) ? SizeSpec(std::get<int64_t>(s))
                                                                   : SizeSpec(std::get<std::string>(s)),
                                &stride_text);
    }
    dim_strides.push_back(d);
  }
  const TensorImpl& impl = *t->impl();
  std::string text = "TENSOR_MATCH: check_tensor(" + source_ + ", " + TypeName(example) + ", " +
                     KeySetRepr(impl.keys()) + ", kiln." + ScalarTypeName(impl.dtype()) + ", device=" +
                     impl.device().str() + ", requires_grad=" + (impl.requires_grad() ? "True" : "False") +
                     ", size=[" + size_text + "], stride=[" + stride_text + "])";
  AddLeaf(std::make_unique<TensorMatchGuard>(std::move(text), origin, reinterpret_cast<PyObject*>(Py_TYPE(example)),
                                             *t, std::move(dims), std::move(dim_strides), root_));
}

void GuardManager::AddLambdaGuard(PyObject* fn, const std::string& origin) {
  KILN_CHECK_TYPE(PyCallable_Check(fn), "add_lambda_guard: expected a callable, got ", TypeName(fn));
  AddLeaf(std::make_unique<LambdaGuard>(fn, source_, origin));
}

bool GuardManager::CheckNode(PyObject* value, CheckState& state, std::string* failed) const {
  for (const auto& leaf : leaves_) {
    if (!leaf->Check(value, state)) {
      if (failed) *failed = Describe(leaf->text(), *state.detail, leaf->origin());
      return false;
    }
  }
  for (const auto& child : children_) {
    PyObject* v = child->accessor_->Access(value, state);
    if (!v) {
      if (failed)
        *failed = Describe("GuardManager: source=" + child->source_ + ", accessed_by=" + child->accessor_->Repr(),
                           *state.detail, "");
      return false;
    }
    bool ok = child->CheckNode(v, state, failed);
    Py_DECREF(v);
    if (!ok) return false;
  }
  return true;
}

void GuardManager::Print(int depth, std::string* out) const {
  for (const auto& leaf : leaves_) {
    *out += Indent(depth) + leaf->text();
    if (!leaf->origin().empty()) *out += "  # " + leaf->origin();
    *out += "\n";
  }
  for (const auto& child : children_) {
    *out += Indent(depth) + "GuardManager: source=" + child->source_ + ", accessed_by=" + child->accessor_->Repr() + "\n";
    child->Print(depth + 1, out);
  }
}

// --- RootGuardManager ---------------------------------------------------------------------------------

RootGuardManager::RootGuardManager(PyObject* f_globals) : GuardManager(this, "L", nullptr), f_globals_(f_globals) {
  KILN_CHECK_TYPE(PyDict_Check(f_globals), "RootGuardManager: f_globals must be a dict, got ", TypeName(f_globals));
  Py_INCREF(f_globals_);
}

RootGuardManager::~RootGuardManager() { Py_DECREF(f_globals_); }

void RootGuardManager::AddGlobalStateGuard(const std::string& origin) {
  AddLeaf(std::make_unique<GlobalStateGuard>(origin));
}

void RootGuardManager::SetShapeEnv(std::shared_ptr<fx::ShapeEnv> env, const std::string& origin) {
  shape_env_ = std::move(env);
  shape_env_origin_ = origin;
}

GuardManager* RootGuardManager::GlobalsDictManager() { return Child(std::make_unique<GlobalsAccessor>(this), "G"); }

int RootGuardManager::SymbolIndex(const std::string& name) {
  for (size_t i = 0; i < symbols_.size(); ++i)
    if (symbols_[i] == name) return static_cast<int>(i);
  symbols_.push_back(name);
  return static_cast<int>(symbols_.size() - 1);
}

bool RootGuardManager::Run(PyObject* f_locals, CheckState& state, std::string* failed) const {
  state.symbol_values.assign(symbols_.size(), 0);
  state.symbol_bound.assign(symbols_.size(), false);
  if (!CheckNode(f_locals, state, failed)) return false;
  return !shape_env_ || CheckShapeEnv(state, failed);
}

bool RootGuardManager::Check(PyObject* f_locals) const {
  CheckState state;
  return Run(f_locals, state, nullptr);
}

std::pair<bool, std::string> RootGuardManager::CheckVerbose(PyObject* f_locals) const {
  CheckState state;
  std::string detail, failed;
  state.detail = &detail;
  bool ok = Run(f_locals, state, &failed);
  return {ok, ok ? std::string() : failed};
}

bool RootGuardManager::CheckShapeEnv(const CheckState& state, std::string* failed) const {
  std::map<std::string, int64_t> values;
  std::string bindings;
  for (size_t i = 0; i < symbols_.size(); ++i) {
    if (!state.symbol_bound[i]) continue;
    values.emplace(symbols_[i], state.symbol_values[i]);
    if (failed) bindings += (bindings.empty() ? "" : ", ") + symbols_[i] + " = " + std::to_string(state.symbol_values[i]);
  }
  bool ok;
  try {
    ok = shape_env_->EvaluateGuards(values);
  } catch (const std::exception& e) {
    if (failed) *failed = Describe("SHAPE_ENV", std::string(e.what()) + " (bound: " + bindings + ")", shape_env_origin_);
    return false;
  }
  if (ok || !failed) return ok;
  // Verbose: name the first guard that fails under the bindings.
  std::map<fx::Expr, fx::Value> vals;
  for (const auto& [name, v] : values) vals[fx::Symbol(name)].i = v;
  for (const auto& [sym, value] : shape_env_->replacements())
    if (!vals.count(sym))
      if (auto v = fx::Evaluate(value, vals)) vals[sym] = *v;
  for (const fx::Guard& g : shape_env_->guards()) {
    auto v = fx::Evaluate(g.expr, vals);
    if (v && !v->i) {
      std::string origin = shape_env_origin_;
      if (!g.location.empty()) origin += (origin.empty() ? "" : "; ") + std::string("guard from ") + g.location;
      *failed = Describe("SHAPE_ENV: " + fx::Str(g.expr), bindings, origin);
      return false;
    }
  }
  *failed = Describe("SHAPE_ENV: symbol ranges", bindings + " (a size symbol never stands for 0 or 1)",
                     shape_env_origin_);
  return false;
}

std::string RootGuardManager::Str() const {
  std::string out = "TREE_GUARD_MANAGER:\n+- RootGuardManager\n";
  Print(1, &out);
  if (shape_env_) {
    for (const std::string& g : shape_env_->FormatGuards()) {
      out += Indent(1) + "SHAPE_ENV: " + g;
      if (!shape_env_origin_.empty()) out += "  # " + shape_env_origin_;
      out += "\n";
    }
  }
  return out;
}

}  // namespace kiln::dynamo
