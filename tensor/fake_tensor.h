// tensor/fake_tensor.h: fake tensors and FakeTensorMode (PyTorch's torch._subclasses.fake_tensor).
//
// A fake tensor is a TensorImpl with no memory: sizes, strides, offset, dtype, the device it
// pretends to be on (usually cpu), the Fake dispatch key, and a data-less storage that names its
// FakeTensorMode (Note [Data-less storages] in storage.h). Ops on fake tensors run only meta
// functions, so their outputs carry exactly the metadata the real kernels would produce.
//
// Note [The Fake dispatch key]: every op's Fake slot is one kernel, FakeKernel (dispatcher.cc
// installs it over whatever the op registered there). It
//   1. finds the mode: the thread's active mode (`with FakeTensorMode():`), else the mode of the
//      first fake argument; fake arguments of another mode raise AssertionError "Mixing fake modes
//      NYI"; real (non-fake) tensor arguments raise PyTorch's "Please convert all Tensors to
//      FakeTensors first ..." unless the mode allows non-fake inputs, when they are converted
//      (Python numbers wrapped as 0-dim tensors are always converted);
//   2. finds the common device of the fake arguments (0-dim cpu tensors defer to the others), or
//      the device= argument of a factory, else cpu;
//   3. runs the op's own Fake-slot function (its meta function, a view function, or the composite
//      kernel) with a FakeAllocContext set: while it is set, EmptyTensor() makes fake tensors of
//      that mode (meta-device requests land on the common device), so meta functions, views
//      (which share the input's storage) and composites all produce fakes of the mode, aliasing
//      preserved. The mode is also entered (the Fake key included), so ops a composite calls
//      inside stay fake. An op without any meta function raises NotImplementedError naming it.
// Everything is boxed C++: no Python on the per-op path.
//
// Note [Fake cross-reference]: a mode with `crossref` set, while active, makes FakeKernel check
// every op called on real (non-fake) tensors: it converts the arguments to fakes, runs the fake
// path, then runs the real kernel (below Fake) and compares each output's sizes, strides, storage
// offset, dtype, device and aliasing (in-place outputs are their input; views share its storage).
// The Fake key stays included while the real kernel runs, so the ops a composite calls are checked
// too. tests/test_fake_tensor.py runs the op tables under it (PyTorch's CrossRefFakeMode).
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>
#include <unordered_map>

#include "tensor/dispatcher.h"
#include "tensor/empty.h"

namespace kiln {

// AssertionError in Python (PyTorch raises AssertionError for fake-mode misuse).
class FakeAssertionError : public Error {
 public:
  using Error::Error;
};

class FakeTensorMode : public std::enable_shared_from_this<FakeTensorMode> {
 public:
  explicit FakeTensorMode(bool allow_non_fake_inputs = false) : allow_non_fake_inputs_(allow_non_fake_inputs) {}

  bool allow_non_fake_inputs() const { return allow_non_fake_inputs_; }
  void set_allow_non_fake_inputs(bool v) { allow_non_fake_inputs_ = v; }

  // A new fake tensor of this mode with the given layout (strides empty: contiguous), on a
  // fresh data-less storage just big enough for it.
  Tensor Empty(const SymDimVector& sizes, const SymDimVector& strides, const SymInt& storage_offset,
               ScalarType dtype, Device device);
  // The fake counterpart of a real (or meta, or other mode's fake) tensor: same sizes, strides,
  // offset, dtype and device; tensors sharing a storage get fakes sharing one fake storage.
  // Memoised while both live: FromReal(t) twice gives the same fake impl. `sizes`/`strides`/
  // `offset`, when given, replace t's (symbolic ones from a ShapeEnv). Autograd state (leafness,
  // requires_grad) is the caller's business (Python's from_tensor).
  Tensor FromReal(const Tensor& real, const SymDimVector* sizes = nullptr, const SymDimVector* strides = nullptr,
                  const SymInt* offset = nullptr);
  // The memoised fake of `real`, or an undefined tensor.
  Tensor Memoised(const Tensor& real);

  // Opaque slots for the layers above: fx/'s ShapeEnv (as its SymbolicContext) and the Python
  // object wrapping this mode (borrowed; python/ sets and clears it).
  std::shared_ptr<void> shape_env;
  void* py_object = nullptr;

  // Cross-checking (Note [Fake cross-reference]): with `crossref` set and this mode active, every
  // op called on real tensors also runs on fakes of them; metadata differences are logged.
  bool crossref = false;
  std::vector<std::string> crossref_mismatches;
  std::set<std::string> crossref_seen;  // ops compared ("aten::add.Tensor")

 private:
  bool allow_non_fake_inputs_;
  std::mutex mu_;
  struct MemoEntry {
    std::weak_ptr<TensorImpl> real, fake;
  };
  std::unordered_map<const TensorImpl*, MemoEntry> tensor_memo_;
  std::unordered_map<const StorageImpl*, std::pair<std::weak_ptr<StorageImpl>, std::weak_ptr<StorageImpl>>>
      storage_memo_;
  size_t memo_pruned_size_ = 0;
};
using FakeTensorModePtr = std::shared_ptr<FakeTensorMode>;

// Whether `t` is a fake tensor, and its mode (null for other tensors).
inline bool IsFake(const Tensor& t) { return t.defined() && t->is_fake(); }
inline FakeTensorMode* FakeModeOf(const Tensor& t) {
  return IsFake(t) && t->storage() ? t->storage()->fake_mode() : nullptr;
}
FakeTensorModePtr FakeModePtrOf(const Tensor& t);

// The thread's active mode stack (innermost last); `with FakeTensorMode():` pushes.
FakeTensorMode* ActiveFakeMode();
// Makes `mode` the active one (and includes the Fake key) for the guard's lifetime; a null mode
// deactivates fake mode (unset_fake_temporarily). Nests; restores on exceptions.
class FakeModeGuard {
 public:
  explicit FakeModeGuard(FakeTensorModePtr mode);
  ~FakeModeGuard();
  FakeModeGuard(const FakeModeGuard&) = delete;
  FakeModeGuard& operator=(const FakeModeGuard&) = delete;

 private:
  FakeTensorModePtr saved_mode_;
  LocalDispatchKeySet saved_keys_;
};
// Non-RAII push/pop for Python's __enter__/__exit__ (same effect as FakeModeGuard).
void PushFakeMode(FakeTensorModePtr mode);
void PopFakeMode();

// While set (inside FakeKernel), EmptyTensor makes fake tensors of `mode`; a request for a meta
// tensor lands on `device`.
struct FakeAllocContext {
  FakeTensorMode* mode = nullptr;
  Device device;
};
const FakeAllocContext*& TlsFakeAllocContext();

// Meta-key fallback: out= overloads without a meta function run their functional sibling's
// (registered by Registry::Get after the built-in ops).
void InstallFakeAndMetaFallbacks(Registry& r);

// The Fake slot of every op (Note [The Fake dispatch key]).
void FakeKernel(const Op& op, DispatchKeySet keys, Stack& stack, void* ctx);

}  // namespace kiln
