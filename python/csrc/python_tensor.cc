// python/csrc/python_tensor.cc: TensorBase: lifetime, metadata attributes, number slots, buffers.
#include "python/csrc/python_tensor.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "python/csrc/arg_parser.h"
#include "python/csrc/python_autograd.h"
#include "python/csrc/op_function.h"
#include "python/csrc/python_dtype.h"
#include "python/csrc/python_fake.h"
#include "python/csrc/python_symbolic.h"
#include "autograd/grad_mode.h"
#include "autograd/view_tracking.h"
#include "fx/tracer.h"
#include "tensor/fake_tensor.h"
#include "tensor/memory_format.h"
#include "tensor/ops/checked_convert.h"
#include "tensor/ops/common.h"

namespace kiln::python {

PyTypeObject* g_tensor_base_type = nullptr;
PyTypeObject* g_tensor_class = nullptr;

namespace {

PyTypeObject g_tensor_base = {PyVarObject_HEAD_INIT(nullptr, 0)};

void TensorDealloc(PyObject* self) {
  auto* t = reinterpret_cast<PyTensor*>(self);
  if (t->tensor.defined() && t->tensor->pyobj() == self) t->tensor->set_pyobj(nullptr);
  t->tensor.~Tensor();
  Py_TYPE(self)->tp_free(self);
}

PyObject* TensorNew(PyTypeObject* type, PyObject*, PyObject*) {
  PyObject* self = type->tp_alloc(type, 0);
  if (!self) return nullptr;
  new (&reinterpret_cast<PyTensor*>(self)->tensor) Tensor();
  return self;
}

#define TENSOR(self) (reinterpret_cast<PyTensor*>(self)->tensor)

const Tensor& Checked(PyObject* self) {
  const Tensor& t = TENSOR(self);
  if (!t.defined()) throw Error("kiln.Tensor object is not initialised (construct tensors with kiln.tensor, "
                                "kiln.empty, ...)");
  return t;
}

PyObject* IntTuple(const SymDimVector& v) {
  PyObject* t = PyTuple_New(v.size());
  for (size_t i = 0; i < v.size(); ++i) PyTuple_SET_ITEM(t, i, SymIntToPython(v[i]));  // kiln.SymInt when symbolic
  return t;
}

// --- attributes ------------------------------------------------------------------------------

PyObject* GetShapeTuple(PyObject* self, void*) { return Guarded([&] { return IntTuple(Checked(self)->sym_sizes()); }); }
PyObject* GetDtype(PyObject* self, void*) {
  return Guarded([&] { PyObject* d = DtypeObject(Checked(self).dtype()); Py_INCREF(d); return d; });
}
PyObject* GetDeviceStr(PyObject* self, void*) {
  return Guarded([&] {
    Device d = Checked(self).device();
    if (d.is_cuda() && d.index < 0) d.index = 0;
    return PyUnicode_FromString(d.str().c_str());
  });
}
PyObject* GetNdim(PyObject* self, void*) { return Guarded([&] { return PyLong_FromLongLong(Checked(self).dim()); }); }
PyObject* GetIsCuda(PyObject* self, void*) { return Guarded([&] { return PyBool_FromLong(Checked(self).device().is_cuda()); }); }
PyObject* GetIsMeta(PyObject* self, void*) { return Guarded([&] { return PyBool_FromLong(Checked(self).device().is_meta()); }); }
PyObject* GetVersion(PyObject* self, void*) { return Guarded([&] { return PyLong_FromLong(Checked(self)->version()); }); }
PyObject* GetItemsize(PyObject* self, void*) { return Guarded([&] { return PyLong_FromLongLong(Checked(self)->itemsize()); }); }

PyGetSetDef kGetSet[] = {
    {"_shape_tuple", GetShapeTuple, nullptr, nullptr, nullptr},
    {"dtype", GetDtype, nullptr, nullptr, nullptr},
    {"_device_str", GetDeviceStr, nullptr, nullptr, nullptr},
    {"ndim", GetNdim, nullptr, nullptr, nullptr},
    {"is_cuda", GetIsCuda, nullptr, nullptr, nullptr},
    {"is_meta", GetIsMeta, nullptr, nullptr, nullptr},
    {"_version", GetVersion, nullptr, nullptr, nullptr},
    {"itemsize", GetItemsize, nullptr, nullptr, nullptr},
    {"requires_grad", GetRequiresGrad, SetRequiresGradAttr, nullptr, nullptr},
    {"grad", GetGrad, SetGradAttr, nullptr, nullptr},
    {"grad_fn", GetGradFn, nullptr, nullptr, nullptr},
    {"is_leaf", GetIsLeaf, nullptr, nullptr, nullptr},
    {"_base", GetBase, nullptr, nullptr, nullptr},
    {"retains_grad", GetRetainsGrad, nullptr, nullptr, nullptr},
    {"output_nr", GetOutputNr, nullptr, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

// --- methods ---------------------------------------------------------------------------------

PyObject* MethodDim(PyObject* self, PyObject*) { return GetNdim(self, nullptr); }
PyObject* MethodNumel(PyObject* self, PyObject*) { return Guarded([&] { return SymIntToPython(Checked(self)->sym_numel()); }); }
PyObject* MethodElementSize(PyObject* self, PyObject*) { return GetItemsize(self, nullptr); }
PyObject* MethodStorageOffset(PyObject* self, PyObject*) {
  return Guarded([&] { return SymIntToPython(Checked(self)->sym_storage_offset()); });
}
PyObject* MethodDataPtr(PyObject* self, PyObject*) {
  return Guarded([&] { return PyLong_FromVoidPtr(Checked(self).raw_data()); });
}
PyObject* MethodStorageDataPtr(PyObject* self, PyObject*) {
  return Guarded([&] {
    const Tensor& t = Checked(self);
    return PyLong_FromVoidPtr(t->has_storage() ? t->storage()->data() : nullptr);
  });
}
// The bytes the storage holds (0 without one): Tensor.untyped_storage().nbytes().
PyObject* MethodStorageNbytes(PyObject* self, PyObject*) {
  return Guarded([&] {
    const Tensor& t = Checked(self);
    return PyLong_FromSize_t(t->storage() ? static_cast<size_t>(t->storage()->nbytes()) : 0);
  });
}
// The storage object's identity (0 without storage): equal for tensors that alias, fake and
// meta ones included (their storages hold no memory), which is what AOTAutograd's alias
// analysis compares.
PyObject* MethodStorageId(PyObject* self, PyObject*) {
  return Guarded([&] {
    const Tensor& t = Checked(self);
    return PyLong_FromVoidPtr(t->storage() ? static_cast<void*>(t->storage().get()) : nullptr);
  });
}

PyObject* MethodIsContiguous(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  return Guarded([&]() -> PyObject* {
    const Tensor& t = Checked(self);
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs + nkw > 1)
      throw TypeError(StrCat("is_contiguous() takes at most 1 argument (", nargs + nkw, " given)"));
    PyObject* format = nargs == 1 ? args[0] : nullptr;
    for (Py_ssize_t i = 0; i < nkw; ++i) {
      std::string name = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, i));
      if (name != "memory_format")
        throw TypeError(StrCat("is_contiguous() got an unexpected keyword argument '", name, "'"));
      format = args[nargs + i];
    }
    int64_t mf = static_cast<int64_t>(MemoryFormat::Contiguous);
    if (format != nullptr && format != Py_None) {
      PyObject* kind = PyObject_GetAttrString(format, "_kiln_enum_kind");
      bool ok = kind && PyUnicode_Check(kind) && std::string(PyUnicode_AsUTF8(kind)) == "memory_format";
      Py_XDECREF(kind);
      PyErr_Clear();
      if (!ok)
        throw TypeError(StrCat("is_contiguous(): argument 'memory_format' must be kiln.memory_format, not ",
                               Py_TYPE(format)->tp_name));
      PyObject* value = PyObject_GetAttrString(format, "_kiln_enum");
      mf = PyLong_AsLongLong(value);
      Py_XDECREF(value);
    }
    if (mf == static_cast<int64_t>(MemoryFormat::Preserve))
      throw Error("is_contiguous(): preserve_format is not a layout a tensor can be contiguous in");
    bool result = mf == static_cast<int64_t>(MemoryFormat::ChannelsLast) ? IsChannelsLastContiguous(t)
                                                                          : t.is_contiguous();
    return PyBool_FromLong(result);
  });
}
PyObject* MethodStrideImpl(PyObject* self, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames, bool size) {
  return Guarded([&]() -> PyObject* {
    const Tensor& t = Checked(self);
    PyObject* dim = nargs > 0 ? args[0] : nullptr;
    if (kwnames && PyTuple_GET_SIZE(kwnames) == 1 && !dim) dim = args[nargs];
    const auto& v = size ? t->sym_sizes() : t->sym_strides();
    if (dim == nullptr || dim == Py_None) {
      if (size) {
        PyObject* mod = PyImport_ImportModule("kiln._size");
        if (!mod) return nullptr;
        PyObject* cls = PyObject_GetAttrString(mod, "Size");
        Py_DECREF(mod);
        PyObject* tup = IntTuple(v);
        PyObject* out = PyObject_CallOneArg(cls, tup);
        Py_DECREF(tup);
        Py_DECREF(cls);
        return out;
      }
      return IntTuple(v);
    }
    if (!PyLong_Check(dim)) throw TypeError(std::string(size ? "size" : "stride") + "(): argument 'dim' must be int");
    int64_t d = WrapDim(PyLong_AsLongLong(dim), t.dim());
    return SymIntToPython(v[d]);
  });
}
PyObject* MethodSize(PyObject* self, PyObject* const* a, Py_ssize_t n, PyObject* k) { return MethodStrideImpl(self, a, n, k, true); }
PyObject* MethodStride(PyObject* self, PyObject* const* a, Py_ssize_t n, PyObject* k) { return MethodStrideImpl(self, a, n, k, false); }

template <typename T>
PyObject* ElementToPython(const char* p) {
  // a bool read as its byte: any nonzero byte is True, as in PyTorch (a float viewed as bool holds
  // bytes like 192, and loading those as bool is undefined: UBSan stopped tolist() there)
  if constexpr (std::is_same_v<T, bool>) return PyBool_FromLong(*reinterpret_cast<const unsigned char*>(p) != 0);
  T v;
  std::memcpy(&v, p, sizeof(T));
  if constexpr (std::is_integral_v<T>) return PyLong_FromLongLong(static_cast<long long>(v));
  else if constexpr (is_complex_v<T>) return PyComplex_FromDoubles(v.real(), v.imag());
  else return PyFloat_FromDouble(static_cast<double>(static_cast<opmath_t<T>>(v)));
}

// A CUDA tensor's values, copied to the host (item(), tolist() and printing synchronize, as
// PyTorch's do); other tensors unchanged.
Tensor OnHost(const Tensor& t) {
  if (!t.device().is_cuda()) return t;
  Tensor host = EmptyTensor(t->sym_sizes(), t.dtype(), Device(DeviceType::CPU));
  return ops::copy_(host, t);
}

PyObject* ItemOf(const Tensor& t) {
  if (t.device().is_cuda()) return ItemOf(OnHost(t));
  if (!t->has_storage() || !TlsLocalDispatchKeySet().included.empty()) {
    // Meta/fake tensors and tracing modes: aten::_local_scalar_dense through the dispatcher
    // (an unbacked symbol under a ShapeEnv; see tensor/ops/dynamic_shape.cc).
    Stack stack{IValue(t)};
    KILN_OP("aten::_local_scalar_dense").Call(stack);
    const IValue& v = stack.at(0);
    if (v.is_symint()) return SymIntToPython(v.to_symint());
    if (v.is_bool()) return PyBool_FromLong(v.to_bool());
    if (v.is_int()) return PyLong_FromLongLong(v.to_int());
    return ScalarToPython(v.to_scalar());
  }
  KILN_CHECK(t.numel() == 1, "a Tensor with ", t.numel(), " elements cannot be converted to Scalar");
  return KILN_DISPATCH_ALL_AND_COMPLEX(t.dtype(), "item", [&] { return ElementToPython<scalar_t>(static_cast<const char*>(t.raw_data())); });
}

PyObject* MethodItem(PyObject* self, PyObject*) { return Guarded([&] { return ItemOf(Checked(self)); }); }

PyObject* ToList(const Tensor& t) {
  if (t.device().is_cuda()) return ToList(OnHost(t));
  KILN_CHECK(t->has_storage(), "tolist() cannot be called on meta tensors");
  DimVector sizes = t.sizes(), strides = t.strides();
  const int64_t item = t->itemsize();
  const int nd = static_cast<int>(sizes.size());
  return KILN_DISPATCH_ALL_AND_COMPLEX(t.dtype(), "tolist", [&]() -> PyObject* {
    std::function<PyObject*(const char*, int)> rec = [&](const char* p, int d) -> PyObject* {
      if (d == nd) return ElementToPython<scalar_t>(p);
      PyObject* list = PyList_New(sizes[d]);
      for (int64_t i = 0; i < sizes[d]; ++i) PyList_SET_ITEM(list, i, rec(p + i * strides[d] * item, d + 1));
      return list;
    };
    return rec(static_cast<const char*>(t.raw_data()), 0);
  });
}
PyObject* MethodToList(PyObject* self, PyObject*) { return Guarded([&] { return ToList(Checked(self)); }); }

PyObject* MethodIsSameImpl(PyObject* self, PyObject* other) {
  if (!IsTensor(other)) Py_RETURN_FALSE;
  return PyBool_FromLong(TENSOR(self).is_same(TENSOR(other)));
}

PyMethodDef kMethods[] = {
    {"dim", MethodDim, METH_NOARGS, nullptr},
    {"ndimension", MethodDim, METH_NOARGS, nullptr},
    {"numel", MethodNumel, METH_NOARGS, nullptr},
    {"nelement", MethodNumel, METH_NOARGS, nullptr},
    {"element_size", MethodElementSize, METH_NOARGS, nullptr},
    {"storage_offset", MethodStorageOffset, METH_NOARGS, nullptr},
    {"data_ptr", MethodDataPtr, METH_NOARGS, nullptr},
    {"_storage_data_ptr", MethodStorageDataPtr, METH_NOARGS, nullptr},
    {"_storage_id", MethodStorageId, METH_NOARGS, nullptr},
    {"_storage_nbytes", MethodStorageNbytes, METH_NOARGS, nullptr},
    {"is_contiguous", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(MethodIsContiguous)), METH_FASTCALL | METH_KEYWORDS, nullptr},
    {"size", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(MethodSize)), METH_FASTCALL | METH_KEYWORDS, nullptr},
    {"stride", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(MethodStride)), METH_FASTCALL | METH_KEYWORDS, nullptr},
    {"item", MethodItem, METH_NOARGS, nullptr},
    {"tolist", MethodToList, METH_NOARGS, nullptr},
    {"_is_same_impl", MethodIsSameImpl, METH_O, nullptr},
    {"requires_grad_", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(MethodRequiresGrad_)), METH_FASTCALL | METH_KEYWORDS, nullptr},
    {"detach", MethodDetach, METH_NOARGS, nullptr},
    {"detach_", MethodDetach_, METH_NOARGS, nullptr},
    {"retain_grad", MethodRetainGrad, METH_NOARGS, nullptr},
    {"is_inference", MethodIsInference, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

// --- number protocol: forwards to the ops, handling reflected operands ------------------------

// Note [Tensor operators]: the op each Python operator on a tensor runs, in one table: the number
// slots below call the op their special method names here, kiln.profiler names the operator's
// range after it, and Dynamo reads its tags (an elementwise op's result metadata depends on a
// scalar operand's type, never its value: Note [Symbolic scalars in arithmetic] in
// _dynamo/output_graph.py). Exposed as kiln._C._tensor_operators, {special method: op name}.
// The reflected forms run the same op with the number as an argument, except `number - tensor`
// (rsub, as PyTorch's Tensor.__rsub__), `number / tensor` (the tensor's reciprocal, times the
// number, as PyTorch's Tensor.__rtruediv__) and the reflected shifts (bitwise_*_shift.Scalar_Tensor).
struct TensorOperator {
  const char* method;
  const char* op;
};
constexpr TensorOperator kTensorOperators[] = {
    {"__add__", "add"}, {"__radd__", "add"}, {"__iadd__", "add_"},
    {"__sub__", "sub"}, {"__rsub__", "rsub"}, {"__isub__", "sub_"},
    {"__mul__", "mul"}, {"__rmul__", "mul"}, {"__imul__", "mul_"},
    {"__truediv__", "div"}, {"__rtruediv__", "reciprocal"}, {"__itruediv__", "div_"},
    {"__floordiv__", "floor_divide"}, {"__rfloordiv__", "floor_divide"}, {"__ifloordiv__", "floor_divide_"},
    {"__mod__", "remainder"}, {"__rmod__", "remainder"}, {"__imod__", "remainder_"},
    {"__pow__", "pow"}, {"__rpow__", "pow"}, {"__ipow__", "pow_"},
    {"__matmul__", "matmul"}, {"__rmatmul__", "matmul"},
    {"__and__", "bitwise_and"}, {"__rand__", "bitwise_and"}, {"__iand__", "bitwise_and_"},
    {"__or__", "bitwise_or"}, {"__ror__", "bitwise_or"}, {"__ior__", "bitwise_or_"},
    {"__xor__", "bitwise_xor"}, {"__rxor__", "bitwise_xor"}, {"__ixor__", "bitwise_xor_"},
    {"__lshift__", "__lshift__"}, {"__rlshift__", "bitwise_left_shift"}, {"__ilshift__", "__ilshift__"},
    {"__rshift__", "__rshift__"}, {"__rrshift__", "bitwise_right_shift"}, {"__irshift__", "__irshift__"},
    {"__neg__", "neg"}, {"__pos__", "positive"}, {"__abs__", "abs"}, {"__invert__", "bitwise_not"},
};

// The op of a special method, found when compiled (a method missing from the table does not build).
consteval const char* OpOf(std::string_view method) {
  for (const TensorOperator& o : kTensorOperators)
    if (method == o.method) return o.op;
  throw "not in kTensorOperators";
}

// A Python number (bool, int or float; PyLong covers bool) on the left of a tensor: a reflected operator.
bool NumberBeforeTensor(PyObject* a, PyObject* b) {
  return !IsTensor(a) && IsTensor(b) && (PyLong_Check(a) || PyFloat_Check(a));
}

PyObject* Binary(const char* name, PyObject* a, PyObject* b) {
  PyObject* args[2] = {a, b};
  PyObject* r = CallPacketByName(name, args, 2);
  // An operand that is neither a tensor nor a number: let Python try the other side.
  if (!r && PyErr_ExceptionMatches(PyExc_TypeError) && !(IsTensor(a) && IsTensor(b))) {
    PyObject* other = IsTensor(a) ? b : a;
    if (!PyLong_Check(other) && !PyFloat_Check(other) && !PyBool_Check(other)) {
      PyErr_Clear();
      Py_RETURN_NOTIMPLEMENTED;
    }
  }
  return r;
}

// One slot serves `tensor <op> other` and `number <op> tensor`: `forward` is the op of the first,
// `reflected` of the second, called with the number first (floor_divide(2, x)), or with the tensor
// first where `swap` (`number + tensor` is tensor.add(number), as PyTorch's Tensor.__radd__: the
// traced graph records add.Tensor(x, 1), and the result is the same, the op being commutative;
// `number - tensor` is rsub(tensor, number): rsub.Scalar in a traced graph).
PyObject* Reflectable(const char* forward, const char* reflected, bool swap, PyObject* a, PyObject* b) {
  if (!NumberBeforeTensor(a, b)) return Binary(forward, a, b);
  if (swap) std::swap(a, b);
  return Binary(reflected, a, b);
}

#define KILN_NB_BINARY(FN, METHOD, SWAP)                                                     \
  PyObject* FN(PyObject* a, PyObject* b) {                                                  \
    return Reflectable(OpOf("__" METHOD "__"), OpOf("__r" METHOD "__"), SWAP, a, b);        \
  }
#define KILN_NB_INPLACE(FN, METHOD) \
  PyObject* FN(PyObject* a, PyObject* b) { return Binary(OpOf("__i" METHOD "__"), a, b); }
KILN_NB_BINARY(NbAdd, "add", true)
KILN_NB_BINARY(NbSub, "sub", true)
KILN_NB_BINARY(NbMul, "mul", true)
KILN_NB_BINARY(NbFloorDiv, "floordiv", false)
KILN_NB_BINARY(NbRemainder, "mod", false)
KILN_NB_BINARY(NbMatmul, "matmul", false)
KILN_NB_BINARY(NbAnd, "and", true)
KILN_NB_BINARY(NbOr, "or", true)
KILN_NB_BINARY(NbXor, "xor", true)
// `x << n` is aten::__lshift__, `n << x` bitwise_left_shift.Scalar_Tensor, as PyTorch's Tensor
// operators (and __rlshift__) call them; >> alike.
KILN_NB_BINARY(NbLshift, "lshift", false)
KILN_NB_BINARY(NbRshift, "rshift", false)
KILN_NB_INPLACE(NbInplaceLshift, "lshift")
KILN_NB_INPLACE(NbInplaceRshift, "rshift")
KILN_NB_INPLACE(NbInplaceAdd, "add")
KILN_NB_INPLACE(NbInplaceSub, "sub")
KILN_NB_INPLACE(NbInplaceMul, "mul")
KILN_NB_INPLACE(NbInplaceTrueDiv, "truediv")
KILN_NB_INPLACE(NbInplaceFloorDiv, "floordiv")
KILN_NB_INPLACE(NbInplaceRemainder, "mod")
KILN_NB_INPLACE(NbInplaceAnd, "and")
KILN_NB_INPLACE(NbInplaceOr, "or")
KILN_NB_INPLACE(NbInplaceXor, "xor")
#undef KILN_NB_BINARY
#undef KILN_NB_INPLACE

// `number / tensor` is `tensor.reciprocal() * number`, as PyTorch's Tensor.__rtruediv__: the same
// rounding, and the backward saves the reciprocal, not the tensor, which may then change in
// place (`v = 2.5 / x; x.zero_()` trains in PyTorch; kiln's div saved x and raised).
PyObject* NbTrueDiv(PyObject* a, PyObject* b) {
  if (NumberBeforeTensor(a, b)) {
    PyObject* reciprocal = CallPacketByName(OpOf("__rtruediv__"), &b, 1);
    if (!reciprocal) return nullptr;
    PyObject* args[2] = {reciprocal, a};
    PyObject* out = CallPacketByName(OpOf("__mul__"), args, 2);
    Py_DECREF(reciprocal);
    return out;
  }
  return Binary(OpOf("__truediv__"), a, b);
}

PyObject* NbPower(PyObject* a, PyObject* b, PyObject* mod) {
  if (mod != Py_None) {
    PyErr_SetString(PyExc_TypeError, "pow() 3rd argument not supported for tensors");
    return nullptr;
  }
  return Binary(OpOf("__pow__"), a, b);
}
PyObject* NbInplacePower(PyObject* a, PyObject* b, PyObject*) { return Binary(OpOf("__ipow__"), a, b); }

PyObject* Unary(const char* name, PyObject* a) { return CallPacketByName(name, &a, 1); }
PyObject* NbNeg(PyObject* a) { return Unary(OpOf("__neg__"), a); }
PyObject* NbPos(PyObject* a) { return Unary(OpOf("__pos__"), a); }
PyObject* NbAbs(PyObject* a) { return Unary(OpOf("__abs__"), a); }
PyObject* NbInvert(PyObject* a) {
  return Guarded([&]() -> PyObject* {
    KILN_CHECK_TYPE(!IsFloating(Checked(a).dtype()), "~ (operator.invert) is only implemented on integer and Boolean-type tensors");
    return Unary(OpOf("__invert__"), a);
  });
}

int NbBool(PyObject* self) {
  try {
    const Tensor& t = Checked(self);
    KILN_CHECK(t.numel() == 1, "Boolean value of Tensor with more than one value is ambiguous");
    PyObject* v = ItemOf(t);
    int r = PyObject_IsTrue(v);
    Py_DECREF(v);
    return r;
  } catch (...) {
    TranslateCurrentException();
    return -1;
  }
}

PyObject* NbIndexLike(PyObject* self, bool as_float) {
  return Guarded([&]() -> PyObject* {
    const Tensor& t = Checked(self);
    KILN_CHECK(t.numel() == 1, "only one element tensors can be converted to Python scalars");
    PyObject* v = ItemOf(t);
    if (!v) return nullptr;
    PyObject* r = as_float ? PyNumber_Float(v) : PyNumber_Long(v);
    Py_DECREF(v);
    return r;
  });
}
PyObject* NbInt(PyObject* self) { return NbIndexLike(self, false); }
PyObject* NbFloat(PyObject* self) { return NbIndexLike(self, true); }
PyObject* NbIndex(PyObject* self) {
  return Guarded([&]() -> PyObject* {
    const Tensor& t = Checked(self);
    KILN_CHECK_TYPE(IsIntegral(t.dtype(), true) && t.numel() == 1,
                    "only integer tensors of a single element can be converted to an index");
    return NbIndexLike(self, false);
  });
}

PyNumberMethods kNumber = {};

PyObject* RichCompare(PyObject* a, PyObject* b, int op) {
  static const char* kNames[] = {"lt", "le", "eq", "ne", "gt", "ge"};
  if ((op == Py_EQ || op == Py_NE) && !IsTensor(b) && !PyLong_Check(b) && !PyFloat_Check(b) && !PyBool_Check(b) &&
      !PyComplex_Check(b)) {
    // x == None, x == "a": PyTorch answers False / True instead of raising.
    if (op == Py_EQ) Py_RETURN_FALSE;
    Py_RETURN_TRUE;
  }
  return Binary(kNames[op], a, b);
}

Py_hash_t TensorHash(PyObject* self) {
  Py_hash_t h = static_cast<Py_hash_t>(reinterpret_cast<uintptr_t>(self) >> 4);
  return h == -1 ? -2 : h;
}

// --- buffer protocol (numpy() and np.asarray share memory) ----------------------------------

const char* BufferFormat(ScalarType t) {
  switch (t) {
    case ScalarType::Bool: return "?";
    case ScalarType::UInt8: return "B";
    case ScalarType::Int8: return "b";
    case ScalarType::Int16: return "h";
    case ScalarType::Int32: return "i";
    case ScalarType::Int64: return "q";
    case ScalarType::Float16: return "e";
    case ScalarType::Float32: return "f";
    case ScalarType::Float64: return "d";
    case ScalarType::ComplexFloat: return "Zf";
    case ScalarType::ComplexDouble: return "Zd";
    default: return nullptr;
  }
}

struct BufferInfo {
  Tensor keep_alive;
  std::vector<Py_ssize_t> shape, strides;
};

int GetBuffer(PyObject* self, Py_buffer* view, int flags) {
  try {
    const Tensor& t = Checked(self);
    KILN_CHECK(t->has_storage() && t.device().is_cpu(), "can't convert ", t.device().str(),
               " tensor to numpy. Copy the tensor to host memory first.");
    const char* fmt = BufferFormat(t.dtype());
    KILN_CHECK_TYPE(fmt != nullptr, "Got unsupported ScalarType ", ScalarTypeDisplayName(t.dtype()));
    auto* info = new BufferInfo{t, {}, {}};
    for (int64_t s : t.sizes()) info->shape.push_back(s);
    for (int64_t s : t.strides()) info->strides.push_back(s * t->itemsize());
    view->buf = t.raw_data();
    view->obj = self;
    Py_INCREF(self);
    view->len = t.numel() * t->itemsize();
    view->readonly = 0;
    view->itemsize = t->itemsize();
    view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(fmt) : nullptr;
    view->ndim = static_cast<int>(t.dim());
    view->shape = info->shape.data();
    view->strides = info->strides.data();
    view->suboffsets = nullptr;
    view->internal = info;
    return 0;
  } catch (...) {
    TranslateCurrentException();
    view->obj = nullptr;
    return -1;
  }
}
void ReleaseBuffer(PyObject*, Py_buffer* view) { delete static_cast<BufferInfo*>(view->internal); }

PyBufferProcs kBuffer = {GetBuffer, ReleaseBuffer};

}  // namespace

PyObject* WrapTensor(Tensor t) {
  if (!t.defined()) Py_RETURN_NONE;
  if (PyObject* existing = t->pyobj()) {
    Py_INCREF(existing);
    return existing;
  }
  PyTypeObject* type = g_tensor_class ? g_tensor_class : g_tensor_base_type;
  if (t->is_fake() && g_fake_tensor_class) type = g_fake_tensor_class;
  PyObject* obj = type->tp_alloc(type, 0);
  if (!obj) return nullptr;
  auto* pt = reinterpret_cast<PyTensor*>(obj);
  new (&pt->tensor) Tensor(std::move(t));
  pt->tensor->set_pyobj(obj);
  return obj;
}

// --- indexing ---------------------------------------------------------------------------------

// Note [Basic indexing in C++]: x[k] for k an int, a slice of ints, None, Ellipsis or a tuple of
// these makes the views Tensor._apply_basic_index (kiln/_tensor.py) makes, by the same ops in the
// same order (select, slice.Tensor, unsqueeze; alias when k selects everything), and x[i] for an
// integer tensor i of at least one dim is index.Tensor(x, [i]), as there (and x[m] for a boolean
// mask m of x's leading shape, outside fake modes and make_fx), parsed here: the
// Python parse cost 2-4 us a call, 2-3x PyTorch's. Anything else (tensors, lists, bools, numpy
// or symbolic integers, a symbolic size, and every error to report) goes to Tensor._getitem, the
// Python parse, which raises PyTorch's messages.
namespace {

struct PyRef {  // a new reference, released at scope exit
  PyObject* p;
  explicit PyRef(PyObject* o) : p(o) {}
  ~PyRef() { Py_XDECREF(p); }
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
};

bool IsPlainInt(PyObject* o) { return PyLong_CheckExact(o); }
bool IsPlainBound(PyObject* o) { return o == Py_None || PyLong_CheckExact(o); }

// Whether a boolean mask's concrete sizes are x's leading ones: x[mask] and x[mask] = v take such
// a mask here; any other goes to the Python parse, which raises PyTorch's messages.
bool MaskFitsLeadingDims(const Tensor& mask, const Tensor& x) {
  if (mask.dim() > x.dim()) return false;
  for (int64_t d = 0; d < mask.dim(); ++d) {
    const SymInt& m = mask->sym_sizes()[d];
    const SymInt& n = x->sym_sizes()[d];
    if (m.is_symbolic() || n.is_symbolic() || m.expect_int() != n.expect_int()) return false;
  }
  return true;
}

// The view, a new reference; nullptr with an error set; or Py_NotImplemented (a new reference)
// for a key the Python parse takes. For a store (`setitem`) the view may be self itself, and a
// slice from 0 to exactly the dim's size is no view, as Tensor._apply_basic_index(setitem=True).
PyObject* BasicIndex(PyObject* self, PyObject* key, bool setitem = false) {
  if (IsTensor(key)) {
    // x[i], i an int64 or int32 tensor of at least one dim: index.Tensor(x, [i])
    if (setitem) Py_RETURN_NOTIMPLEMENTED;
    const Tensor& k = UnpackTensor(key);
    const Tensor& base = UnpackTensor(self);
    if (k.dim() == 0 || base.dim() == 0) Py_RETURN_NOTIMPLEMENTED;
    if (k.dtype() == ScalarType::Bool) {
      // x[mask]: index.Tensor takes the mask as the Python parse's nonzero columns, in eager
      // only (a traced graph records the parse's nonzero and selects); a mask of the wrong shape
      // goes to the Python parse for its message
      if (ActiveFakeMode() != nullptr || fx::ActiveTracer() != nullptr || !MaskFitsLeadingDims(k, base)) {
        Py_RETURN_NOTIMPLEMENTED;
      }
    } else if (k.dtype() != ScalarType::Int64 && k.dtype() != ScalarType::Int32) {
      Py_RETURN_NOTIMPLEMENTED;
    }
    PyRef list(PyList_New(1));
    if (list.p == nullptr) return nullptr;
    Py_INCREF(key);
    PyList_SET_ITEM(list.p, 0, key);
    PyObject* args[2] = {self, list.p};
    return CallPacketByName("index", args, 2);
  }
  PyObject* const* items = &key;
  Py_ssize_t n = 1;
  if (PyTuple_CheckExact(key)) {
    items = &PyTuple_GET_ITEM(key, 0);
    n = PyTuple_GET_SIZE(key);
  }
  int64_t consumed = 0, ellipses = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* k = items[i];
    if (k == Py_None) continue;
    if (k == Py_Ellipsis) {
      ++ellipses;
      continue;
    }
    if (IsPlainInt(k)) {
      ++consumed;
      continue;
    }
    if (!PySlice_Check(k)) Py_RETURN_NOTIMPLEMENTED;
    auto* sl = reinterpret_cast<PySliceObject*>(k);
    if (!IsPlainBound(sl->start) || !IsPlainBound(sl->stop) || !IsPlainBound(sl->step)) Py_RETURN_NOTIMPLEMENTED;
    ++consumed;
  }
  const Tensor& base = UnpackTensor(self);
  if (ellipses > 1 || consumed > base.dim()) Py_RETURN_NOTIMPLEMENTED;  // the Python parse raises
  for (const SymInt& size : base->sym_sizes())
    if (size.is_symbolic()) Py_RETURN_NOTIMPLEMENTED;
  Py_INCREF(self);
  PyRef result(self);
  int64_t dim = 0;
  auto call = [&](const char* op, std::initializer_list<PyObject*> args) {
    PyObject* r = CallPacketByName(op, args.begin(), static_cast<Py_ssize_t>(args.size()));
    Py_XDECREF(result.p);
    result.p = r;
    return r != nullptr;
  };
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* k = items[i];
    if (k == Py_None) {
      PyRef d(PyLong_FromLongLong(dim));
      if (!call("unsqueeze", {result.p, d.p})) return nullptr;
      ++dim;
    } else if (k == Py_Ellipsis) {
      dim += base.dim() - consumed;
    } else if (IsPlainInt(k)) {
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(k, &overflow);
      const int64_t size = UnpackTensor(result.p).size(dim);  // concrete: base's sizes are
      if (overflow != 0 || v < -size || v >= size) {  // out of bounds: the Python parse raises
        Py_RETURN_NOTIMPLEMENTED;
      }
      PyRef d(PyLong_FromLongLong(dim));
      if (!call("select", {result.p, d.p, k})) return nullptr;
    } else {
      auto* sl = reinterpret_cast<PySliceObject*>(k);
      int overflow = 0;
      const long long step = sl->step == Py_None ? 1 : PyLong_AsLongLongAndOverflow(sl->step, &overflow);
      if (overflow != 0 || step <= 0) Py_RETURN_NOTIMPLEMENTED;  // step must be greater than zero
      bool whole = sl->start == Py_None && sl->stop == Py_None;
      if (setitem && !whole && step == 1) {
        const long long start = sl->start == Py_None ? 0 : PyLong_AsLongLongAndOverflow(sl->start, &overflow);
        const long long stop = sl->stop == Py_None ? INT64_MAX : PyLong_AsLongLongAndOverflow(sl->stop, &overflow);
        if (overflow != 0) Py_RETURN_NOTIMPLEMENTED;
        whole = start == 0 && stop == UnpackTensor(result.p).size(dim);
      }
      if (!(whole && step == 1)) {
        // a bound left out is 0 or INT64_MAX, as PyTorch's indexing passes it
        PyRef d(PyLong_FromLongLong(dim));
        PyRef start(sl->start == Py_None ? PyLong_FromLong(0) : (Py_INCREF(sl->start), sl->start));
        PyRef stop(sl->stop == Py_None ? PyLong_FromLongLong(INT64_MAX) : (Py_INCREF(sl->stop), sl->stop));
        const bool ok = step == 1 ? call("slice", {result.p, d.p, start.p, stop.p})
                                  : call("slice", {result.p, d.p, start.p, stop.p, sl->step});
        if (!ok) return nullptr;
      }
      ++dim;
    }
  }
  if (!setitem && result.p == self && !call("alias", {self})) return nullptr;
  PyObject* r = result.p;
  result.p = nullptr;
  return r;
}

PyObject* Subscript(PyObject* self, PyObject* key) {
  PyObject* r = BasicIndex(self, key);
  if (r != Py_NotImplemented) return r;
  Py_DECREF(r);
  static PyObject* name = PyUnicode_InternFromString("_getitem");
  return PyObject_CallMethodOneArg(self, name, key);
}

// Note [Item assignment in C++]: x[k] = v runs here, in the order Tensor._setitem (kiln/_tensor.py)
// runs it and by the same ops, for the keys BasicIndex parses, an integer index tensor
// (index_put_) and a boolean mask (masked_fill_), with v a Python number or a tensor: the
// Python parse cost 4.5 us a call, 2.7x PyTorch's. A number becomes a 0-dim tensor of x's dtype
// first, as kiln.tensor makes it, so only outside fake modes, make_fx and inference mode (where
// kiln.tensor makes a fake constant, a graph constant or an inference tensor); there, and for
// every other key and value, Tensor._setitem runs, which also raises every error but the ops'.
// A number stored by x[k] = v, taken as PyTorch's setitem takes it: an int is unpacked as int64
// first (ValueError past it), then checked against x's dtype as its scalar_tensor checks it
// (integers and float32; float16 and bfloat16 round 1e6 to inf). False with the error set.
bool CheckSetItemNumber(PyObject* value, ScalarType dtype) {
  if (PyLong_Check(value) && !PyBool_Check(value)) {
    int overflow = 0;
    PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow != 0) {
      PyErr_SetString(PyExc_ValueError, "Overflow when unpacking long long");
      return false;
    }
  }
  try {
    Scalar s;
    ToScalar(value, &s);
    CheckFitsDtype(s, dtype, nullptr, FloatRange::kFloat32Only);
  } catch (...) {
    TranslateCurrentException();
    return false;
  }
  return true;
}

// Where kiln.tensor makes a number a fake constant, a graph constant or an inference tensor, so
// the number's 0-dim tensor is left to Tensor._setitem (Note [Item assignment in C++]).
bool NumbersNeedThePythonParse() {
  return ActiveFakeMode() != nullptr || fx::ActiveTracer() != nullptr || autograd::InferenceMode::is_enabled();
}

// 0 when done, -1 with an error set, 1 for Tensor._setitem.
int FastSetItem(PyObject* self, PyObject* key, PyObject* value) {
  const bool number = PyFloat_CheckExact(value) || PyLong_CheckExact(value) || PyBool_Check(value);
  if (!number && !IsTensor(value)) return 1;
  const Tensor& base = UnpackTensor(self);
  for (const SymInt& size : base->sym_sizes())
    if (size.is_symbolic()) return 1;
  auto done = [](PyObject* r) {
    if (r == nullptr) return -1;
    Py_DECREF(r);
    return 0;
  };
  const bool key_is_tensor = IsTensor(key);
  if (key_is_tensor && UnpackTensor(key).dtype() == ScalarType::Bool) {
    // x[mask] = a number or a 0-dim tensor, mask's shape a prefix of x's: masked_fill_ with the
    // mask viewed to x's rank, the value cast to x's dtype first
    const Tensor& mask = UnpackTensor(key);
    if (!MaskFitsLeadingDims(mask, base) || (!number && UnpackTensor(value).dim() != 0)) return 1;
    PyRef shape(PyTuple_New(base.dim()));
    if (shape.p == nullptr) return -1;
    for (int64_t d = 0; d < base.dim(); ++d)
      PyTuple_SET_ITEM(shape.p, d, PyLong_FromLongLong(d < mask.dim() ? mask.size(d) : 1));
    PyObject* view_args[2] = {key, shape.p};
    PyRef view(CallPacketByName("view", view_args, 2));
    if (view.p == nullptr) return -1;
    if (number && !CheckSetItemNumber(value, base.dtype())) return -1;
    Py_INCREF(value);
    PyRef fill(value);
    if (number && IsReducedFloat(base.dtype())) {
      // a 0-dim tensor of x's dtype, as setitem makes it (masked_fill_ with a number would refuse
      // what float16 rounds to inf)
      if (NumbersNeedThePythonParse()) return 1;
      Py_SETREF(fill.p, WrapTensor(TensorFromData(value, base.dtype())));
    } else if (!number) {
      PyObject* to_args[2] = {value, DtypeObject(base.dtype())};  // borrowed
      Py_SETREF(fill.p, CallPacketByName("to", to_args, 2));
      if (fill.p == nullptr) return -1;
    }
    PyObject* args[3] = {self, view.p, fill.p};
    return done(CallPacketByName("masked_fill_", args, 3));
  }
  const bool advanced = key_is_tensor;  // x[i] = v: index_put_(x, [i], v)
  if (advanced) {
    const Tensor& index = UnpackTensor(key);
    if (index.dim() == 0 || base.dim() == 0 ||
        (index.dtype() != ScalarType::Int64 && index.dtype() != ScalarType::Int32)) {
      return 1;
    }
  }
  PyRef v(nullptr);
  if (number) {
    if (NumbersNeedThePythonParse()) return 1;
    if (!CheckSetItemNumber(value, base.dtype())) return -1;
    v.p = WrapTensor(TensorFromData(value, base.dtype()));
  } else {
    Py_INCREF(value);
    v.p = value;
  }
  PyRef result(nullptr);
  if (advanced) {
    Py_INCREF(self);
    result.p = self;
  } else {
    result.p = BasicIndex(self, key, /*setitem=*/true);
    if (result.p == nullptr) return -1;
    if (result.p == Py_NotImplemented) return 1;
  }
  const Tensor& dst = UnpackTensor(result.p);
  const Tensor& src = UnpackTensor(v.p);  // until v is replaced by a view below
  for (const SymInt& size : src->sym_sizes())
    if (size.is_symbolic()) return 1;
  if (src->requires_grad() && !dst->requires_grad() && autograd::GradMode::is_enabled() && !dst.is_same(base)) {
    autograd::MarkView(dst, base);  // so that the write reaches x's history (CopySlices)
  }
  // the value's leading 1s are dropped before it broadcasts, unless it has the destination's shape
  const auto dst_sizes = dst.sizes();
  const auto src_sizes = src.sizes();
  const bool same_shape = std::equal(src_sizes.begin(), src_sizes.end(), dst_sizes.begin(), dst_sizes.end());
  int64_t lead = 0;
  while (lead < src.dim() && src_sizes[lead] == 1 && !same_shape) ++lead;
  const bool value_is_0d = src.dim() == 0;
  if (lead > 0) {
    PyRef shape(PyTuple_New(src.dim() - lead));
    if (shape.p == nullptr) return -1;
    for (int64_t d = lead; d < src.dim(); ++d) PyTuple_SET_ITEM(shape.p, d - lead, PyLong_FromLongLong(src_sizes[d]));
    PyObject* args[2] = {v.p, shape.p};
    Py_SETREF(v.p, CallPacketByName("view", args, 2));
    if (v.p == nullptr) return -1;
  }
  if (advanced) {
    PyRef indices(PyList_New(1));
    if (indices.p == nullptr) return -1;
    Py_INCREF(key);
    PyList_SET_ITEM(indices.p, 0, key);
    PyObject* args[3] = {result.p, indices.p, v.p};
    return done(CallPacketByName("index_put_", args, 3));
  }
  if (value_is_0d && dst.dim() != 0 && UnpackTensor(v.p).device().type == DeviceType::CPU) {
    PyObject* args[2] = {result.p, v.p};
    return done(CallPacketByName("fill_", args, 2));
  }
  const auto v_sizes = UnpackTensor(v.p).sizes();
  if (!std::equal(v_sizes.begin(), v_sizes.end(), dst_sizes.begin(), dst_sizes.end())) {
    PyRef shape(IntTuple(dst->sym_sizes()));
    if (shape.p == nullptr) return -1;
    PyObject* args[2] = {v.p, shape.p};
    Py_SETREF(v.p, CallPacketByName("expand", args, 2));
    if (v.p == nullptr) return -1;
  }
  PyObject* args[2] = {result.p, v.p};
  return done(CallPacketByName("copy_", args, 2));
}

int AssignSubscript(PyObject* self, PyObject* key, PyObject* value) {
  if (value == nullptr) {
    PyErr_SetString(PyExc_TypeError, "Tensor does not support deleting items");
    return -1;
  }
  const int fast = FastSetItem(self, key, value);
  if (fast != 1) return fast;
  static PyObject* name = PyUnicode_InternFromString("_setitem");
  PyObject* r = PyObject_CallMethodObjArgs(self, name, key, value, nullptr);
  if (r == nullptr) return -1;
  Py_DECREF(r);
  return 0;
}

PyMappingMethods kMapping = {};

}  // namespace

void InitTensorType(PyObject* module) {
  PyTypeObject& t = g_tensor_base;
  t.tp_name = "kiln._C.TensorBase";
  t.tp_basicsize = sizeof(PyTensor);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  t.tp_dealloc = TensorDealloc;
  t.tp_new = TensorNew;
  t.tp_getset = kGetSet;
  t.tp_methods = kMethods;
  t.tp_richcompare = RichCompare;
  t.tp_hash = TensorHash;
  t.tp_as_buffer = &kBuffer;
  kNumber.nb_add = NbAdd;
  kNumber.nb_subtract = NbSub;
  kNumber.nb_multiply = NbMul;
  kNumber.nb_true_divide = NbTrueDiv;
  kNumber.nb_floor_divide = NbFloorDiv;
  kNumber.nb_remainder = NbRemainder;
  kNumber.nb_power = NbPower;
  kNumber.nb_matrix_multiply = NbMatmul;
  kNumber.nb_and = NbAnd;
  kNumber.nb_or = NbOr;
  kNumber.nb_xor = NbXor;
  kNumber.nb_lshift = NbLshift;
  kNumber.nb_rshift = NbRshift;
  kNumber.nb_inplace_lshift = NbInplaceLshift;
  kNumber.nb_inplace_rshift = NbInplaceRshift;
  kNumber.nb_negative = NbNeg;
  kNumber.nb_positive = NbPos;
  kNumber.nb_absolute = NbAbs;
  kNumber.nb_invert = NbInvert;
  kNumber.nb_bool = NbBool;
  kNumber.nb_int = NbInt;
  kNumber.nb_float = NbFloat;
  kNumber.nb_index = NbIndex;
  kNumber.nb_inplace_add = NbInplaceAdd;
  kNumber.nb_inplace_subtract = NbInplaceSub;
  kNumber.nb_inplace_multiply = NbInplaceMul;
  kNumber.nb_inplace_true_divide = NbInplaceTrueDiv;
  kNumber.nb_inplace_floor_divide = NbInplaceFloorDiv;
  kNumber.nb_inplace_remainder = NbInplaceRemainder;
  kNumber.nb_inplace_power = NbInplacePower;
  kNumber.nb_inplace_and = NbInplaceAnd;
  kNumber.nb_inplace_or = NbInplaceOr;
  kNumber.nb_inplace_xor = NbInplaceXor;
  t.tp_as_number = &kNumber;
  kMapping.mp_subscript = Subscript;
  kMapping.mp_ass_subscript = AssignSubscript;
  t.tp_as_mapping = &kMapping;
  if (PyType_Ready(&t) < 0) throw std::runtime_error("TensorBase type");
  g_tensor_base_type = &t;
  Py_INCREF(&t);
  PyModule_AddObject(module, "TensorBase", reinterpret_cast<PyObject*>(&t));
  PyObject* operators = PyDict_New();  // Note [Tensor operators]
  if (operators == nullptr) throw std::runtime_error("_tensor_operators");
  for (const TensorOperator& o : kTensorOperators) {
    PyObject* op = PyUnicode_FromString(o.op);
    if (op == nullptr || PyDict_SetItemString(operators, o.method, op) < 0) throw std::runtime_error("_tensor_operators");
    Py_DECREF(op);
  }
  PyModule_AddObject(module, "_tensor_operators", operators);
}

}  // namespace kiln::python
