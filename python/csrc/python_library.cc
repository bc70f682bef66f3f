// python/csrc/python_library.cc: operators defined from Python (kiln.library, torch.library's
// counterpart): a schema registered in the op registry at run time, and Python functions as its
// kernels for a dispatch key.
//
// Note [Python kernels]: a kernel defined in Python is a boxed kernel whose `ctx` is the Python
// callable (tensor/dispatcher.h's Kernel). It takes the GIL (the wrapper program and the autograd
// engine may call ops without it), passes the stack's arguments as the schema names them
// (keyword-only ones as keywords), and converts what the function returns back by the schema's
// returns, refusing a result of the wrong kind with a TypeError naming the op. An exception the
// function raises reaches the caller as itself (Note [Python errors through the dispatcher] in
// arg_parser.cc). Everything else about the op is the registry's: the Tracing, Functionalize and
// Fake layers treat it as any other op, so make_fx and Dynamo record one node for it.
//
// The Autograd kernel is special: it calls Python only when the call needs a gradient (grad mode
// on and some tensor argument requiring grad); otherwise it runs the op below autograd in C++, as
// the autograd layer does for any op. The Python function (kiln.library's, around an
// autograd.Function) calls the op again under no_grad for the forward, which lands below.
#include <Python.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "autograd/below_autograd.h"
#include "autograd/grad_mode.h"
#include "dynamo/eval_frame.h"
#include "python/csrc/arg_parser.h"
#include "python/csrc/python_fx.h"
#include "runtime/error.h"
#include "tensor/dispatcher.h"

namespace py = pybind11;

namespace kiln::python {
namespace {

// The Python callables installed as kernels, kept for the life of the process: the registry's
// Kernel holds a borrowed pointer, which a thread already dispatching to a replaced kernel may
// still be about to call.
void KeepAlive(py::object fn) {
  static auto* installed = new std::vector<py::object>();
  installed->push_back(std::move(fn));
}

// As PyTorch's custom operators: a result never shares memory with an argument (Inductor plans
// the memory of an extern op's results as its own, and functionalization copies them as new).
void CheckResultsAreFresh(const Op& op, const Stack& args, const Stack& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    if (!results[r].is_tensor() || !op.schema().returns[r].alias.set.empty()) continue;  // Tensor(a): a view
    const Tensor& out = results[r].to_tensor();
    if (!out.defined() || !out->has_storage()) continue;
    for (const IValue& a : args) {
      if (!a.is_tensor()) continue;
      const Tensor& in = a.to_tensor();
      if (in.defined() && in->has_storage() && in->storage().get() == out->storage().get())
        throw Error(StrCat(op.name(), ": result ", r, " shares memory with an argument; a custom operator's "
                           "results must not alias its inputs (return a copy, x.clone())"));
    }
  }
}

// The stack's results of `fn` for `op`: `result` converted by the schema's returns.
void PushResults(const Op& op, PyObject* result, Stack& stack) {
  const FunctionSchema& schema = op.schema();
  stack.clear();
  std::vector<PyObject*> items;
  if (!schema.returns_tuple) {
    if (schema.returns.empty()) return;
    items.push_back(result);
  } else if (schema.returns.empty() && result == Py_None) {
    return;  // "-> ()": the function returns None
  } else {
    if (!PyTuple_Check(result) && !PyList_Check(result))
      throw TypeError(StrCat(op.name(), ": its kernel must return a tuple of ", schema.returns.size(),
                             " values, got ", Py_TYPE(result)->tp_name));
    Py_ssize_t n = PySequence_Size(result);
    if (n != static_cast<Py_ssize_t>(schema.returns.size()))
      throw TypeError(StrCat(op.name(), ": its kernel must return ", schema.returns.size(), " values, got ", n));
    for (Py_ssize_t i = 0; i < n; ++i) items.push_back(PySequence_Fast_GET_ITEM(result, i));
  }
  for (size_t i = 0; i < items.size(); ++i) {
    IValue v;
    std::string why;
    if (!ConvertResult(schema.returns[i], items[i], &v, &why))
      throw TypeError(StrCat(op.name(), ": its kernel returned ", Py_TYPE(items[i])->tp_name, " for result ", i,
                             " (", schema.returns[i].type_str, ")", why.empty() ? "" : ": " + why));
    stack.push_back(std::move(v));
  }
}

// Note [Python kernels run as written]: kiln.compile's frame hook is off while a Python kernel
// runs, so a compile around an eager call (or a kiln frame the hook skips, whose callees it still
// sees) never captures the user's kernel, fake function or setup_context as frames of their own,
// as PyTorch runs its custom operators' Python under torch._disable_dynamo. The tracers still see
// the ops the function calls: they work in the dispatcher, not on frames.
class FrameHookOff {
 public:
  FrameHookOff() : previous_(dynamo::SetEvalFrameCallback(nullptr)) {}
  ~FrameHookOff() {
    Py_XDECREF(dynamo::SetEvalFrameCallback(previous_));
    Py_XDECREF(previous_);
  }
  FrameHookOff(const FrameHookOff&) = delete;
  FrameHookOff& operator=(const FrameHookOff&) = delete;

 private:
  PyObject* previous_;
};

void CallPython(const Op& op, PyObject* fn, Stack& stack, bool fresh_results = true) {
  py::gil_scoped_acquire gil;
  FrameHookOff hook_off;
  const FunctionSchema& schema = op.schema();
  py::list args;
  py::dict kwargs;
  for (size_t i = 0; i < schema.arguments.size() && i < stack.size(); ++i) {
    py::object v = IValueToPython(stack[i]);
    if (schema.arguments[i].kwarg_only) kwargs[py::str(schema.arguments[i].name)] = v;
    else args.append(v);
  }
  PyObject* result = PyObject_Call(fn, py::tuple(args).ptr(), kwargs.ptr());
  if (result == nullptr) throw py::error_already_set();
  py::object owned = py::reinterpret_steal<py::object>(result);
  if (!fresh_results) return PushResults(op, result, stack);
  Stack inputs = stack;
  PushResults(op, result, stack);
  CheckResultsAreFresh(op, inputs, stack);
}

void PythonKernel(const Op& op, DispatchKeySet, Stack& stack, void* ctx) {
  CallPython(op, static_cast<PyObject*>(ctx), stack);
}

// A CompositeImplicitAutograd kernel is made of other ops, which autograd and the tracers see
// one by one: its results may be views, as those ops make them.
void PythonCompositeKernel(const Op& op, DispatchKeySet, Stack& stack, void* ctx) {
  CallPython(op, static_cast<PyObject*>(ctx), stack, /*fresh_results=*/false);
}

void PythonAutogradKernel(const Op& op, DispatchKeySet keys, Stack& stack, void* ctx) {
  if (autograd::GradMode::is_enabled() && autograd::AnyRequiresGrad(stack))
    return CallPython(op, static_cast<PyObject*>(ctx), stack);
  autograd::RunBelow(op, keys, stack);
}

DispatchKey KeyNamed(const std::string& name) {
  static const std::map<std::string, DispatchKey> keys = {
      {"CPU", DispatchKey::CPU}, {"CUDA", DispatchKey::CUDA}, {"Meta", DispatchKey::Meta},
      {"Fake", DispatchKey::Fake}, {"Autograd", DispatchKey::Autograd}};
  auto it = keys.find(name);
  if (it == keys.end())
    throw ValueError(StrCat("kiln.library: unknown dispatch key '", name,
                            "' (expected CPU, CUDA, Meta, Fake, Autograd or CompositeImplicitAutograd)"));
  return it->second;
}

Op& FindOp(const std::string& full_name) {
  Op* op = Registry::Get().Find(full_name);
  if (op == nullptr) throw ValueError(StrCat("kiln.library: no operator named '", full_name, "'"));
  return *op;
}

}  // namespace

void InitLibraryBindings(py::module_& m) {
  m.def("_library_define", [](const std::string& schema_text, const std::vector<std::string>& tags) {
    FunctionSchema schema = ParseSchema(schema_text);
    if (schema.name.rfind("aten::", 0) == 0)
      throw ValueError(StrCat("kiln.library: '", schema.full_name(), "' is in the aten namespace, which is kiln's own"));
    Registry& r = Registry::Get();
    if (r.Find(schema.full_name()) != nullptr)
      throw Error(StrCat("kiln.library: the operator '", schema.full_name(), "' is already defined"));
    // Tags steer the compiler (a pointwise op gets lowered, a view recomputed for free): an opaque
    // Python function has none of those properties, so it takes none.
    if (!tags.empty())
      throw ValueError(StrCat("kiln.library: '", schema.full_name(), "': operators defined in Python take no tags"));
    r.Def(schema_text);
    Op& op = *r.Find(schema.full_name());
    op.RebuildTable();  // the layers' fallbacks (autograd, tracing, functionalization)
    return op.name();
  }, "Registers an operator schema (kiln.library.define); returns its full name.");
  m.def("_library_impl", [](const std::string& full_name, const std::string& key, py::object fn) {
    Op& op = FindOp(full_name);
    if (!PyCallable_Check(fn.ptr())) throw py::type_error("kiln.library: a kernel must be callable");
    if (key == "CompositeImplicitAutograd") {
      KeepAlive(fn);
      op.SetComposite(Kernel{&PythonCompositeKernel, fn.ptr()});
      return;
    }
    DispatchKey k = KeyNamed(key);
    KeepAlive(fn);
    op.SetKernel(k, Kernel{k == DispatchKey::Autograd ? &PythonAutogradKernel : &PythonKernel, fn.ptr()});
  }, "Installs a Python function as the operator's kernel for a dispatch key (kiln.library.impl).");
  m.def("_library_has_kernel", [](const std::string& full_name, const std::string& key) {
    Op& op = FindOp(full_name);
    if (key == "CompositeImplicitAutograd") return op.HasComposite();
    return op.HasKernel(KeyNamed(key));
  });
}

}  // namespace kiln::python
