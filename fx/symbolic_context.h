// fx/symbolic_context.h: the thread-local hook through which data-dependent ops mint unbacked
// symbols.
//
// Note [Unbacked symbols through a thread-local context]: ops whose output size or value depends
// on data (nonzero, masked_select, item) cannot compute it from metadata. While a ShapeEnv is
// active (fake tensor mode sets it for the mode's duration), their meta functions ask it for a
// fresh unbacked symbol; without one they raise DynamicOutputShapeException /
// DataDependentOutputException (fake) or NotImplementedError (meta). This layer only sees the
// interface; ShapeEnv (symbolic_shapes.h) implements it. The meta kernels that use it are
// installed over the registry by InstallDynamicShapeKernels() (dynamic_shape_ops.cc), so tensor/
// needs no knowledge of symbolic contexts (its meta device raises for these ops without them).
//
// Note [SymFloat through SymInt slots]: the boxed stack has no SymFloat slot; a SymInt whose node
// is a float expression carries a symbolic float (item() of a float tensor under a ShapeEnv) and
// becomes kiln.SymFloat at the Python boundary. Integer arithmetic on it is a bug in the caller.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "runtime/error.h"
#include "tensor/sym_int.h"

namespace kiln {

class SymbolicContext {
 public:
  virtual ~SymbolicContext() = default;
  // A fresh unbacked integer with the known bounds [min, max] (max nullopt: unbounded);
  // `size_like` marks it as a size (nonzero's row count), as kiln._check_is_size does.
  virtual SymNodePtr NewUnbackedSymInt(int64_t min, std::optional<int64_t> max, bool size_like) = 0;
  // A fresh unbacked float (item() of a floating tensor).
  virtual SymNodePtr NewUnbackedSymFloat() = 0;
};
using SymbolicContextPtr = std::shared_ptr<SymbolicContext>;

// This thread's context (null when none is active).
SymbolicContextPtr& TlsSymbolicContext();

class SymbolicContextGuard {
 public:
  explicit SymbolicContextGuard(SymbolicContextPtr ctx) : saved_(TlsSymbolicContext()) {
    TlsSymbolicContext() = std::move(ctx);
  }
  ~SymbolicContextGuard() { TlsSymbolicContext() = std::move(saved_); }

 private:
  SymbolicContextPtr saved_;
};

// Registers aten::_local_scalar_dense and the Meta/Fake kernels of nonzero, masked_select and
// _local_scalar_dense that mint unbacked symbols (dynamic_shape_ops.cc). Idempotent; init/'s
// InstallDispatchLayers calls it.
void InstallDynamicShapeKernels();

}  // namespace kiln
