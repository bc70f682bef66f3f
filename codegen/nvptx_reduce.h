// codegen/nvptx_reduce.h: GPU reductions from kernel IR through LLVM 14's NVPTX back end.
//
// A ReduceKernel computes, for each of O outputs, out[o] = post(combine over r < R of pre(inputs
// at (o, r))): `pre` maps the inputs' elements to the accumulator (x, x * x, |x|, x != 0, ...),
// `combine` is a ReduceKind (sum, prod, NaN-propagating max/min, argmax/argmin with the first
// index on ties), `post` maps the reduced value to the output (a mean's scale, a norm's root). As
// with PointwiseKernels, one compiled kernel serves every size: the outputs' and the reduction's
// sizes and every input's strides over them are launch parameters (Note [Reduction kernel shape]
// in nvptx_reduce_emit.cc).
//
// The kernel's parameters, in order (the launcher's contract):
//   for each operand: a tensor operand's element pointer, or a scalar operand's value (float for
//       f32/bf16/f16, double for f64, int64 for integers and bool);
//   int64 O (outputs), R (reduced elements per output), chunk (reduced elements per split, a
//       multiple of the vector width), blocks (blocks per split);
//   int64 out_sizes[out_ndim], red_sizes[red_ndim] (outermost first);
//   for each tensor input in order: int64 out_strides[out_ndim], red_strides[red_ndim] (elements).
// Launch blocks * splits blocks of bx * by threads; split s reduces r in [s * chunk, (s + 1) * chunk)
// and writes output element s * O + o (the splits' partial results follow each other, for a
// second pass over them).
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_ir.h"
#include "codegen/nvptx_codegen.h"

namespace kiln::codegen {

struct ReduceKernel {
  std::string name;              // a C identifier ("sum_f32"); the symbol adds a hash
  std::vector<Buffer> operands;  // [0] the output; [1] the index output (i64) for argmax/argmin; then the inputs
  std::vector<bool> scalar;      // per operand: a by-value parameter (inputs only)
  ReduceKind reduce = ReduceKind::kSum;
  DType acc = DType::F32;        // the accumulator's compute dtype: F32, F64 or I64
  ExprPtr pre;                   // ("load", input, any index): the input at the current element
  ExprPtr post;                  // ("acc", 0): the reduced value; loads of scalar operands only
  // argmax/argmin: the input holding each element's index (a second pass over partial results),
  // or -1 for the element's position r in the reduction.
  int index_input = -1;
};

struct ReduceLayout {
  // true: the bx threads of a row reduce one output together (the reduction is innermost in
  // memory) and a block covers by outputs; false (a column reduction): the bx threads of a row
  // cover bx neighbouring outputs, coalesced, and the by rows split the reduction.
  bool row = true;
  int bx = 32, by = 8;  // powers of two; 32 <= bx * by <= kMaxReduceThreads
  // row only: elements per thread per load, one vector access (every tensor input walks the
  // reduction with stride 1, and O's offsets, chunk and R keep every access aligned).
  int vector = 1;
  int out_ndim = 1, red_ndim = 1;  // 1..8 dims each (a single output is one dim of size 1)
  bool index32 = true;             // every element offset fits in int32 (32-bit index division)
};

constexpr int kMaxReduceThreads = 1024;
// Loads a thread keeps in flight: its loop issues this many steps' loads before folding them (the
// launcher sizes rows so a thread has about this many steps).
constexpr int kReduceLoadsInFlight = 4;

// The first input operand (1, or 2 for argmax/argmin).
inline int FirstReduceInput(const ReduceKernel& k) {
  return k.reduce == ReduceKind::kArgmax || k.reduce == ReduceKind::kArgmin ? 2 : 1;
}

// Throws kiln::ValueError naming the kernel when the description is malformed.
void ValidateReduce(const ReduceKernel& k, const ReduceLayout& layout);

// `<name>_<hash>` over everything that shapes the code (as PointwiseSymbol), and the in-memory key.
std::string ReduceSymbol(const ReduceKernel& k, const ReduceLayout& layout);
PointwiseKey KeyOf(const ReduceKernel& k, const ReduceLayout& layout);

std::string ReduceLLVMIR(const ReduceKernel& k, const ReduceLayout& layout);
std::string ReducePTX(const ReduceKernel& k, const ReduceLayout& layout);

}  // namespace kiln::codegen
