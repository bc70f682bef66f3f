// inductor/ir/body.h: what a lazy value computes at one index, as data (Note [Bodies]).
//
// Note [Bodies]: a lowering describes a value (a pointwise result, a reduction's source) by the
// expression computing one element at symbolic indices, as PyTorch's Inductor calls its inner_fn
// with sympy symbols. A Body is that expression traced once: kernel IR (codegen/kernel_ir.h)
// whose Load(k) stands for reads[k] -- another value read at one Affine per dimension over this
// body's variables -- and whose LoopIndex(v) is variable v. Placing it in a kernel (Instantiate)
// composes each read's indices with the kernel's, asks a Reader what the read becomes there (a
// load of a buffer, the reduction accumulated in this kernel, another body inlined), and
// substitutes. A value is no closure evaluated again by every probe and kernel: it is traced once,
// can be printed, hashed and compared, and analysed without a Python interpreter.
//
// Values are named by their int64 handles (values.h, Note [Values]). `as_of` names a snapshot of which values were realized: a
// read under one takes a value's buffer only if it was realized then, and recomputes it otherwise
// (Note [Realized as of] in inductor/scheduler/realization.h); -1 is none.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "inductor/ir/affine.h"

namespace kiln::inductor::ir {

struct Read {
  int64_t value = 0;
  std::vector<Affine> index;  // one per dimension of the value read
  int64_t as_of = -1;
  bool operator==(const Read& o) const { return value == o.value && index == o.index && as_of == o.as_of; }
};

struct Body {
  codegen::ExprPtr expr;
  std::vector<Read> reads;
  // "read0 = v7[d0, 2*d1 + 1]" lines, then the expression (kernel IR text, Load(k) as read k).
  std::string ToString() const;
  uint64_t Hash() const;
};
bool operator==(const Body& a, const Body& b);

// The variables a body is placed at: dims[v] for variable v >= 0, `reduced` for kReduced.
struct Placement {
  std::vector<Affine> dims;
  Affine reduced;
  bool has_reduced = false;
  Affine operator()(int v) const;  // throws kiln::ValueError for a variable it does not place
};

// Records the reads of an expression being built (a lowering's function called once), each
// distinct read once, in the order they are first made (a kernel numbers its buffers in it).
class Tracer {
 public:
  // Load(k) standing for reading `value` at `index` (over the traced body's variables).
  codegen::ExprPtr Read(int64_t value, std::vector<Affine> index, int64_t as_of = -1);
  // `body` computed here (not read from any buffer), placed at `at`: its reads join this trace.
  // Its reads without a snapshot take `as_of`.
  codegen::ExprPtr Inline(const Body& body, const Placement& at, int64_t as_of = -1);
  // The body of `expr` over the reads made so far; the tracer is empty again.
  Body Finish(codegen::ExprPtr expr);

 private:
  std::vector<ir::Read> reads_;
};

// Decides what a read becomes inside one kernel (the scheduler's KernelBuilder, or a probe).
class Reader {
 public:
  virtual ~Reader() = default;
  // `index` is over the kernel's loop variables (outer dims 0.., the inner loop kReduced).
  virtual codegen::ExprPtr ReadValue(int64_t value, const std::vector<Affine>& index, int64_t as_of) = 0;
};

// `body` in a kernel, its variables placed at `at` (Affines over the kernel's variables): the
// reader is asked for each read in order, and LoopIndex(v) becomes the value of at(v). Reads
// without a snapshot take `as_of`.
codegen::ExprPtr Instantiate(const Body& body, const Placement& at, Reader& reader, int64_t as_of = -1);

// An Affine as an i64 expression over kernel IR loop indices: offset + sum LoopIndex(v) * coeff.
codegen::ExprPtr AffineValue(const Affine& a);

// The kernel IR index of an element offset over a kernel's variables (n_outer outer ones and the
// inner kReduced); throws kiln::ValueError for a variable outside them.
codegen::Index KernelIndex(const Affine& offset, int n_outer);

}  // namespace kiln::inductor::ir
