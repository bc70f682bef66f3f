// tensor/index_ops_test.cc: hand-checked cases for tensor/ops/index.cc (cat, split, gather, scatter,
// advanced indexing, masked ops, where, nonzero) with their error messages, and a check over all
// the new op families that meta functions agree with the CPU kernels and schemas round-trip.
#include <functional>

#include "runtime/thread_pool.h"
#include "tensor/testing/op_test_util.h"

namespace kiln {
namespace {

using namespace ::kiln::optest;  // NOLINT: test helpers

// --- cat / stack / split -------------------------------------------------------------------

TEST(IndexOps, CatPromotesAndSkipsLegacyEmpty) {
  Tensor a = F({1, 2, 3, 4}, {2, 2});
  Tensor b = L({5, 6}, {2, 1});
  Tensor empty = F({});
  Tensor out = Call("aten::cat", TL{a, empty, b}, int64_t(1));
  EXPECT_EQ(out.sizes(), Shape({2, 3}));
  EXPECT_EQ(out.dtype(), ScalarType::Float32);
  EXPECT_EQ(FV(out), (std::vector<float>{1, 2, 5, 3, 4, 6}));
  Tensor rows = Call("aten::cat", TL{a, F({9, 9}, {1, 2})}, int64_t(-2));
  EXPECT_EQ(FV(rows), (std::vector<float>{1, 2, 3, 4, 9, 9}));
  // int64 + int32 -> int64
  Tensor i = Call("aten::cat", TL{L({1}), ops::to_dtype(L({2}), ScalarType::Int32)}, int64_t(0));
  EXPECT_EQ(i.dtype(), ScalarType::Int64);
}

TEST(IndexOps, CatErrors) {
  ExpectError<Error>([] { Call("aten::cat", TL{}, int64_t(0)); }, "expected a non-empty list");
  ExpectError<Error>([] { Call("aten::cat", TL{F({1}, {}), F({1})}, int64_t(0)); },
                     "zero-dimensional tensor (at position 0) cannot be concatenated");
  ExpectError<Error>([] { Call("aten::cat", TL{F({1, 2}, {1, 2}), F({1, 2, 3}, {1, 3})}, int64_t(0)); },
                     "Sizes of tensors must match except in dimension 0. Expected size 2 but got size 3 for tensor "
                     "number 1 in the list.");
  ExpectError<IndexError>([] { Call("aten::cat", TL{F({1})}, int64_t(2)); }, "Dimension out of range");
}

TEST(IndexOps, CatMeta) {
  Tensor a = ops::empty({SymInt(2), SymInt(3)}, ScalarType::Float32, Device(DeviceType::Meta));
  Tensor b = ops::empty({SymInt(2), SymInt(5)}, ScalarType::Float64, Device(DeviceType::Meta));
  Tensor out = Call("aten::cat", TL{a, b}, int64_t(1));
  EXPECT_EQ(out.sizes(), Shape({2, 8}));
  EXPECT_EQ(out.dtype(), ScalarType::Float64);
  EXPECT_TRUE(out.device().is_meta());
}

TEST(IndexOps, Stack) {
  Tensor out = Call("aten::stack", TL{F({1, 2}), F({3, 4})}, int64_t(1));
  EXPECT_EQ(out.sizes(), Shape({2, 2}));
  EXPECT_EQ(FV(out), (std::vector<float>{1, 3, 2, 4}));
  ExpectError<Error>([] { Call("aten::stack", TL{F({1, 2}), F({3})}, int64_t(0)); },
                     "stack expects each tensor to be equal size, but got [2] at entry 0 and [1] at entry 1");
}

TEST(IndexOps, SplitAndChunk) {
  Tensor x = Arange(5);
  auto parts = Call<TL>("aten::split.Tensor", x, SymInt(2), int64_t(0));
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(FV(parts[2]), (std::vector<float>{4}));
  EXPECT_TRUE(parts[1]->storage() == x->storage());  // views
  auto sized = Call<TL>("aten::split_with_sizes", x, SL{1, 4}, int64_t(0));
  EXPECT_EQ(FV(sized[1]), (std::vector<float>{1, 2, 3, 4}));
  auto chunks = Call<TL>("aten::chunk", ops::view(Arange(6), {2, 3}), int64_t(2), int64_t(1));
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].sizes(), Shape({2, 2}));
  EXPECT_EQ(FV(chunks[1]), (std::vector<float>{2, 5}));
  ExpectError<Error>([&] { Call<TL>("aten::split_with_sizes", x, SL{2, 2}, int64_t(0)); },
                     "split_with_sizes expects split_sizes to sum exactly to 5 (input tensor's size at dimension 0), "
                     "but got split_sizes=[2, 2]");
  ExpectError<Error>([&] { Call<TL>("aten::chunk", x, int64_t(0), int64_t(0)); },
                     "chunk expects `chunks` to be greater than 0, got: 0");
}

// --- gather / scatter / index_select --------------------------------------------------------

TEST(IndexOps, Gather) {
  Tensor x = F({1, 2, 3, 4}, {2, 2});
  Tensor out = Call("aten::gather", x, int64_t(1), L({0, 0, 1, 0}, {2, 2}), false);
  EXPECT_EQ(FV(out), (std::vector<float>{1, 1, 4, 3}));
  Tensor rows = Call("aten::gather", x, int64_t(0), L({1, 0}, {1, 2}), false);
  EXPECT_EQ(FV(rows), (std::vector<float>{3, 2}));
  ExpectError<Error>([&] { Call("aten::gather", x, int64_t(1), L({0, 2}, {1, 2}), false); },
                          "index 2 is out of bounds for dimension 1 with size 2");
  ExpectError<Error>([&] { Call("aten::gather", x, int64_t(1), ops::to_dtype(L({0}, {1, 1}), ScalarType::Int32), false); },
                     "gather(): Expected dtype int64 for index");
  ExpectError<Error>([&] { Call("aten::gather", x, int64_t(1), L({0, 0, 0}, {3, 1}), false); },
                     "Size does not match at dimension 0");
}

TEST(IndexOps, Scatter) {
  Tensor zeros = F({0, 0, 0, 0, 0, 0}, {2, 3});
  Tensor src = F({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor out = Call("aten::scatter.src", zeros, int64_t(1), L({2, 0, 1, 1}, {2, 2}), src);
  EXPECT_EQ(FV(out), (std::vector<float>{2, 0, 1, 0, 5, 0}));
  EXPECT_EQ(FV(zeros), (std::vector<float>(6, 0)));  // functional
  Tensor filled = Call("aten::scatter.value", zeros, int64_t(0), L({1, 0, 1}, {1, 3}), Scalar(7.0));
  EXPECT_EQ(FV(filled), (std::vector<float>{0, 7, 0, 7, 0, 7}));
  Tensor acc = Call("aten::scatter_add", F({0, 0, 0}), int64_t(0), L({0, 2, 0, 0}), F({1, 2, 3, 4}));
  EXPECT_EQ(FV(acc), (std::vector<float>{8, 0, 2}));
  Tensor self = F({0, 0, 0});
  Call("aten::scatter_add_", self, int64_t(0), L({1}), F({5}));
  EXPECT_EQ(FV(self), (std::vector<float>{0, 5, 0}));
  ExpectError<Error>([&] { Call("aten::scatter.src", zeros, int64_t(1), L({0}, {1, 1}), L({1}, {1, 1})); },
                     "scatter(): Expected self.dtype to be equal to src.dtype");
  ExpectError<Error>([&] { Call("aten::scatter.value", zeros, int64_t(1), L({3}, {1, 1}), Scalar(1.0)); },
                          "index 3 is out of bounds for dimension 1 with size 3");
}

TEST(IndexOps, IndexAdd) {
  // rows 0 and 2 of self get alpha times source rows, repeated indices in order; functional
  Tensor self = F({0, 0, 0, 0, 0, 0}, {3, 2});
  Tensor out = Call("aten::index_add", self, int64_t(0), L({2, 0, 2}), F({1, 2, 3, 4, 5, 6}, {3, 2}), Scalar(2.0));
  EXPECT_EQ(FV(out), (std::vector<float>{6, 8, 0, 0, 12, 16}));
  EXPECT_EQ(FV(self), (std::vector<float>(6, 0)));
  Call("aten::index_add_", self, int64_t(1), L({1}), F({7, 8, 9}, {3, 1}), Scalar(1));
  EXPECT_EQ(FV(self), (std::vector<float>{0, 7, 0, 8, 0, 9}));
  // nothing is written when a later index is bad; the error follows PyTorch's kernel path
  ExpectError<Error>([&] { Call("aten::index_add_", self, int64_t(0), L({0, 3}), F({1, 1, 1, 1}, {2, 2}),
                                Scalar(1)); }, "index 3 is out of bounds for dimension 0 with size 3");
  ExpectError<IndexError>([&] { Call("aten::index_add_", F({0, 0}), int64_t(0), L({1, 2}), F({1, 1}), Scalar(1)); },
                          "index out of range in self");
  EXPECT_EQ(FV(self), (std::vector<float>{0, 7, 0, 8, 0, 9}));
  ExpectError<Error>([&] { Call("aten::index_add", self, int64_t(0), L({0}), L({1, 1}, {1, 2}), Scalar(1)); },
                     "index_add_(): self (Float) and source (Long) must have the same scalar type");
  // an expanded self repeats elements: refused before the kernel runs (Note [Overlapping writes])
  Tensor expanded = ops::expand(F({0, 0}, {1, 2}), {SymInt(3), SymInt(2)});
  ExpectError<Error>([&] { Call("aten::index_add_", expanded, int64_t(0), L({0}), F({1, 1}, {1, 2}), Scalar(1)); },
                     "more than one element of the written-to tensor refers to a single memory location");
}

TEST(IndexOps, IndexSelect) {
  Tensor x = ops::view(Arange(6), {2, 3});
  Tensor out = Call("aten::index_select", x, int64_t(1), L({2, 0, 2}));
  EXPECT_EQ(out.sizes(), Shape({2, 3}));
  EXPECT_EQ(FV(out), (std::vector<float>{2, 0, 2, 5, 3, 5}));
  Tensor t = Call("aten::index_select", ops::transpose(x, 0, 1), int64_t(0), L({1}));
  EXPECT_EQ(FV(t), (std::vector<float>{1, 4}));
  ExpectError<IndexError>([&] { Call("aten::index_select", x, int64_t(0), L({2})); },
                          "index 2 is out of bounds for dimension 0 with size 2");
  ExpectError<IndexError>([&] { Call("aten::index_select", x, int64_t(0), L({0, 0}, {1, 2})); },
                          "Index is supposed to be a vector");
}

// --- advanced indexing ----------------------------------------------------------------------

TEST(IndexOps, IndexTensorBasic) {
  Tensor x = ops::view(Arange(12), {3, 4});
  // x[[2, 0]]
  Tensor rows = Call("aten::index.Tensor", x, OptionalTensorList{L({2, 0})});
  EXPECT_EQ(rows.sizes(), Shape({2, 4}));
  EXPECT_EQ(FV(rows), (std::vector<float>{8, 9, 10, 11, 0, 1, 2, 3}));
  // x[:, [-1]]
  Tensor col = Call("aten::index.Tensor", x, OptionalTensorList{std::nullopt, L({-1})});
  EXPECT_EQ(col.sizes(), Shape({3, 1}));
  EXPECT_EQ(FV(col), (std::vector<float>{3, 7, 11}));
  // x[[0, 2], [1, 3]] -> pointwise pairs; x[[[0], [2]], [1, 3]] broadcasts to [2, 2]
  Tensor pairs = Call("aten::index.Tensor", x, OptionalTensorList{L({0, 2}), L({1, 3})});
  EXPECT_EQ(FV(pairs), (std::vector<float>{1, 11}));
  Tensor grid = Call("aten::index.Tensor", x, OptionalTensorList{L({0, 2}, {2, 1}), L({1, 3})});
  EXPECT_EQ(grid.sizes(), Shape({2, 2}));
  EXPECT_EQ(FV(grid), (std::vector<float>{1, 3, 9, 11}));
}

TEST(IndexOps, IndexTensorBoolAndTranspose) {
  Tensor x = ops::view(Arange(24), {2, 3, 4});
  // x[mask] with a [2, 3] mask -> [n, 4]
  Tensor mask = B({1, 0, 0, 0, 0, 1}, {2, 3});
  Tensor m = Call("aten::index.Tensor", x, OptionalTensorList{mask});
  EXPECT_EQ(m.sizes(), Shape({2, 4}));
  EXPECT_EQ(FV(m), (std::vector<float>{0, 1, 2, 3, 20, 21, 22, 23}));
  // x[[0, 1], :, [0, 3]]: indices not adjacent -> index dims first: [2, 3]
  Tensor t = Call("aten::index.Tensor", x, OptionalTensorList{L({0, 1}), std::nullopt, L({0, 3})});
  EXPECT_EQ(t.sizes(), Shape({2, 3}));
  EXPECT_EQ(FV(t), (std::vector<float>{0, 4, 8, 15, 19, 23}));
  // x[:, [0, 2], [1]]: adjacent -> stays in place: [2, 2]
  Tensor a = Call("aten::index.Tensor", x, OptionalTensorList{std::nullopt, L({0, 2}), L({1})});
  EXPECT_EQ(a.sizes(), Shape({2, 2}));
  EXPECT_EQ(FV(a), (std::vector<float>{1, 9, 13, 21}));
  // meta: int indices give shapes
  Tensor meta = ops::empty({SymInt(2), SymInt(3), SymInt(4)}, ScalarType::Float32, Device(DeviceType::Meta));
  Tensor mi = ops::empty({SymInt(5)}, ScalarType::Int64, Device(DeviceType::Meta));
  Tensor mr = Call("aten::index.Tensor", meta, OptionalTensorList{std::nullopt, std::nullopt, mi});
  EXPECT_EQ(mr.sizes(), Shape({2, 3, 5}));
}

TEST(IndexOps, IndexTensorErrors) {
  Tensor x = ops::view(Arange(6), {2, 3});
  ExpectError<IndexError>([&] { Call("aten::index.Tensor", x, OptionalTensorList{L({2})}); },
                          "index 2 is out of bounds for dimension 0 with size 2");
  ExpectError<IndexError>([&] { Call("aten::index.Tensor", x, OptionalTensorList{L({0}), L({0}), L({0})}); },
                          "too many indices for tensor of dimension 2 (got 3)");
  ExpectError<IndexError>([&] { Call("aten::index.Tensor", x, OptionalTensorList{L({0, 1}), L({0, 1, 2})}); },
                          "shape mismatch: indexing tensors could not be broadcast together with shapes [2], [3]");
  ExpectError<IndexError>([&] { Call("aten::index.Tensor", x, OptionalTensorList{B({1, 0, 1})}); },
                          "The shape of the mask [3] at index 0 does not match the shape of the indexed tensor [2, 3] "
                          "at index 0");
  ExpectError<IndexError>([&] { Call("aten::index.Tensor", x, OptionalTensorList{F({0})}); },
                          "tensors used as indices must be long, int, byte or bool tensors");
}

TEST(IndexOps, IndexPut) {
  Tensor x = F({0, 0, 0, 0, 0, 0}, {2, 3});
  Tensor out = Call("aten::index_put", x, OptionalTensorList{L({1, 0}), L({2, 2})}, F({5, 6}), false);
  EXPECT_EQ(FV(out), (std::vector<float>{0, 0, 6, 0, 0, 5}));
  EXPECT_EQ(FV(x), (std::vector<float>(6, 0)));
  // accumulate with duplicates; values broadcast over the indexed rows
  Call("aten::index_put_", x, OptionalTensorList{L({0, 0})}, F({1, 2, 3}), true);
  EXPECT_EQ(FV(x), (std::vector<float>{2, 4, 6, 0, 0, 0}));
  // values with extra leading 1s broadcast as they are: a shape mismatch, as PyTorch's op (only
  // `x[i] = v` drops them), with x unchanged; values aliasing self are read before writing
  ExpectError<Error>([&] { Call("aten::index_put_", x, OptionalTensorList{L({1})}, F({7, 8, 9}, {1, 1, 3}), false); },
                     "shape mismatch: value tensor of shape [1, 1, 3] cannot be broadcast to indexing result of shape "
                     "[1, 3]");
  EXPECT_EQ(FV(x), (std::vector<float>{2, 4, 6, 0, 0, 0}));
  Call("aten::index_put_", x, OptionalTensorList{L({1})}, F({7, 8, 9}, {1, 3}), false);
  EXPECT_EQ(FV(x), (std::vector<float>{2, 4, 6, 7, 8, 9}));
  Call("aten::index_put_", x, OptionalTensorList{L({0, 1})}, ops::select(x, 0, 1), false);
  EXPECT_EQ(FV(x), (std::vector<float>{7, 8, 9, 7, 8, 9}));
  // through a transposed view, with a mask
  Tensor y = F({1, 2, 3, 4}, {2, 2});
  Tensor yt = ops::transpose(y, 0, 1);
  Call("aten::index_put_", yt, OptionalTensorList{B({0, 1, 1, 0}, {2, 2})}, F({9}, {}), false);
  EXPECT_EQ(FV(y), (std::vector<float>{1, 9, 9, 4}));
  ExpectError<Error>([&] { Call("aten::index_put_", x, OptionalTensorList{L({0})}, L({1}), false); },
                     "Index put requires the source and destination dtypes match, got Float for the destination and "
                     "Long for the source.");
  ExpectError<Error>([&] { Call("aten::index_put_", x, OptionalTensorList{L({0, 1})}, F({1, 2}), false); },
                     "shape mismatch: value tensor of shape [2] cannot be broadcast to indexing result of shape [2, 3]");
}

// --- masked ops, where, nonzero --------------------------------------------------------------

TEST(IndexOps, MaskedFillAndSelect) {
  Tensor x = F({1, 2, 3, 4}, {2, 2});
  Tensor mask = B({1, 0});  // broadcasts over rows
  Tensor out = Call("aten::masked_fill.Scalar", x, mask, Scalar(-1.0));
  EXPECT_EQ(FV(out), (std::vector<float>{-1, 2, -1, 4}));
  Tensor out2 = Call("aten::masked_fill.Tensor", x, B({0, 1}, {2, 1}), F({7}, {}));
  EXPECT_EQ(FV(out2), (std::vector<float>{1, 2, 7, 7}));
  Call("aten::masked_fill_.Scalar", x, mask, Scalar(int64_t(0)));
  EXPECT_EQ(FV(x), (std::vector<float>{0, 2, 0, 4}));
  // functional masked_fill broadcasts self against the mask
  Tensor wide = Call("aten::masked_fill.Scalar", F({5}), B({1, 0, 1}), Scalar(0.0));
  EXPECT_EQ(FV(wide), (std::vector<float>{0, 5, 0}));
  Tensor sel = Call("aten::masked_select", F({1, 2, 3, 4}, {2, 2}), mask);
  EXPECT_EQ(FV(sel), (std::vector<float>{1, 3}));
  ExpectError<Error>([&] { Call("aten::masked_fill.Scalar", x, F({1, 0}), Scalar(0.0)); },
                     "masked_fill_ only supports boolean masks, but got mask with dtype Float");
  ExpectError<Error>([&] { Call("aten::masked_fill.Tensor", x, mask, F({1, 2})); },
                     "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with 1 dimension(s).");
}

TEST(IndexOps, WhereAndNonzero) {
  Tensor c = B({1, 0, 1});
  Tensor out = Call("aten::where.self", c, L({1, 2, 3}), F({10, 20, 30}));
  EXPECT_EQ(out.dtype(), ScalarType::Float32);
  EXPECT_EQ(FV(out), (std::vector<float>{1, 20, 3}));
  Tensor s = Call("aten::where.ScalarOther", c, L({1, 2, 3}), Scalar(int64_t(0)));
  EXPECT_EQ(s.dtype(), ScalarType::Int64);
  EXPECT_EQ(LV(s), (std::vector<int64_t>{1, 0, 3}));
  Tensor s2 = Call("aten::where.ScalarSelf", c, Scalar(0.5), L({1, 2, 3}));
  EXPECT_EQ(s2.dtype(), ScalarType::Float32);
  EXPECT_EQ(FV(s2), (std::vector<float>{0.5, 2, 0.5}));
  ExpectError<Error>([&] { Call("aten::where.self", F({1}), F({1}), F({1})); },
                     "where expected condition to be a boolean tensor, but got a tensor with dtype Float");
  Tensor nz = Call("aten::nonzero", F({0, 1, 2, 0, 0, 3}, {2, 3}));
  EXPECT_EQ(nz.sizes(), Shape({3, 2}));
  EXPECT_EQ(nz.dtype(), ScalarType::Int64);
  EXPECT_EQ(LV(nz), (std::vector<int64_t>{0, 1, 0, 2, 1, 2}));
  auto parts = Call<TL>("aten::where", B({0, 1, 1}));
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(LV(parts[0]), (std::vector<int64_t>{1, 2}));
}

// contiguous() and reshape() of a transposed tensor give row-major results (regression: clone's
// preserve_format used to keep the transposed strides, so reshape's view failed).
TEST(IndexOps, ContiguousOfTransposed) {
  Tensor t = ops::transpose(ops::view(Arange(6), {2, 3}), 0, 1);
  Tensor c = ops::contiguous(t);
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(FV(c), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(FV(ops::reshape(t, {SymInt(-1)})), (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

// Large inputs run the read-only index kernels in parallel; results and errors are unchanged.
TEST(IndexOps, LargeInputsInParallel) {
  const int saved = GetNumThreads();
  SetNumThreads(2);
  const int64_t n = 100000;
  Tensor x = Arange(n);
  std::vector<int64_t> rev(n);
  for (int64_t i = 0; i < n; ++i) rev[i] = n - 1 - i;
  std::vector<float> expect(rev.begin(), rev.end());
  EXPECT_EQ(FV(Call("aten::index_select", x, int64_t(0), L(rev))), expect);
  EXPECT_EQ(FV(Call("aten::gather", x, int64_t(0), L(rev), false)), expect);
  EXPECT_EQ(FV(Call("aten::index.Tensor", x, OptionalTensorList{L(rev)})), expect);
  EXPECT_EQ(FV(Call("aten::flip", x, std::vector<int64_t>{0})), expect);
  rev[n - 1] = n;
  ExpectError<IndexError>([&] { Call("aten::index.Tensor", x, OptionalTensorList{L(rev)}); },
                          "index 100000 is out of bounds for dimension 0 with size 100000");
  SetNumThreads(saved);
}

// The typed wrappers in ops.h reach the same kernels.
TEST(IndexOps, TypedWrappers) {
  Tensor x = ops::view(Arange(6), {2, 3});
  EXPECT_EQ(ops::cat({x, x}, 1).sizes(), Shape({2, 6}));
  EXPECT_EQ(ops::stack({x, x}).sizes(), Shape({2, 2, 3}));
  EXPECT_EQ(ops::chunk(x, 3, 1).size(), 3u);
  EXPECT_EQ(FV(ops::index(x, {std::nullopt, L({2})})), (std::vector<float>{2, 5}));
  EXPECT_EQ(LV(std::get<1>(ops::topk(x, 1))), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(FV(ops::where(B({1, 0, 1}), x, ops::flip(x, {1}))), (std::vector<float>{0, 1, 2, 3, 4, 5}));
  Generator g = std::make_shared<GeneratorImpl>(3);
  EXPECT_EQ(ops::randn({SymInt(4)}, ScalarType::Float64, g).dtype(), ScalarType::Float64);
}

// --- meta functions agree with the CPU kernels; schemas round-trip ---------------------------

Tensor ToMeta(const Tensor& t) {
  return Call("aten::_to_copy", t, std::optional<ScalarType>(), std::optional<Layout>(),
              std::optional<Device>(Device(DeviceType::Meta)), std::optional<bool>(), false,
              std::optional<MemoryFormat>());
}

TEST(MetaOps, ShapesAndDtypesMatchCpu) {
  using Fn = std::function<Tensor(const std::function<Tensor(const Tensor&)>&)>;
  Tensor x = ops::view(Arange(12), {3, 4}), li = L({2, 0}), mask = B({1, 0, 1, 1});
  const std::vector<std::pair<const char*, Fn>> cases = {
      {"cat", [&](auto T) { return Call("aten::cat", TL{T(x), T(ops::to_dtype(x, ScalarType::Float64))}, int64_t(1)); }},
      {"stack", [&](auto T) { return Call("aten::stack", TL{T(x), T(x)}, int64_t(2)); }},
      {"gather", [&](auto T) { return Call("aten::gather", T(x), int64_t(1), T(L({0, 1}, {1, 2})), false); }},
      {"scatter", [&](auto T) { return Call("aten::scatter.value", T(x), int64_t(0), T(L({1}, {1, 1})), Scalar(1.0)); }},
      {"index_select", [&](auto T) { return Call("aten::index_select", T(x), int64_t(0), T(li)); }},
      {"index", [&](auto T) { return Call("aten::index.Tensor", T(x), OptionalTensorList{std::nullopt, T(li)}); }},
      {"index_put", [&](auto T) { return Call("aten::index_put", T(x), OptionalTensorList{T(li)}, T(F({1}, {})), true); }},
      {"masked_fill", [&](auto T) { return Call("aten::masked_fill.Scalar", T(x), T(mask), Scalar(0.0)); }},
      {"where", [&](auto T) { return Call("aten::where.ScalarOther", T(mask), T(x), Scalar(int64_t(1))); }},
      {"tril", [&](auto T) { return Call("aten::tril", T(x), int64_t(1)); }},
      {"sort", [&](auto T) { return std::get<1>(Call<TT>("aten::sort", T(x), int64_t(0), true)); }},
      {"topk", [&](auto T) { return std::get<0>(Call<TT>("aten::topk", T(x), SymInt(2), int64_t(1), true, true)); }},
      {"one_hot", [&](auto T) { return Call("aten::one_hot", T(li), int64_t(5)); }},
      {"constant_pad_nd", [&](auto T) { return Call("aten::constant_pad_nd", T(x), SL{1, -1, 2, 0}, Scalar(0.0)); }},
      {"pad", [&](auto T) { return Call("aten::pad", T(x), SL{2, 1}, std::string("reflect"), std::optional<double>()); }},
      {"repeat", [&](auto T) { return Call("aten::repeat", T(x), SL{2, 1, 3}); }},
      {"flip", [&](auto T) { return Call("aten::flip", T(x), std::vector<int64_t>{0}); }},
      {"roll", [&](auto T) { return Call("aten::roll", T(x), SL{1}, SL{0}); }},
      {"clamp", [&](auto T) { return Call("aten::clamp", T(L({1, 2})), OptScalar(0.5), OptScalar()); }},
      {"clamp.Tensor", [&](auto T) { return Call("aten::clamp.Tensor", T(x), OptT(T(F({1}))), OptT()); }},
      {"lerp", [&](auto T) { return Call("aten::lerp.Tensor", T(x), T(F({1}, {1, 1})), T(F({0.5}))); }},
      {"addcdiv", [&](auto T) { return Call("aten::addcdiv", T(L({1})), T(x), T(F({2})), Scalar(int64_t(1))); }},
      {"cumsum", [&](auto T) { return Call("aten::cumsum", T(L({1, 2})), int64_t(0), OptDtype()); }},
      {"split", [&](auto T) { return Call<TL>("aten::split.Tensor", T(x), SymInt(3), int64_t(1))[1]; }},
  };
  for (const auto& [name, fn] : cases) {
    SCOPED_TRACE(name);
    Tensor cpu = fn([](const Tensor& t) { return t; });
    Tensor meta = fn([](const Tensor& t) { return ToMeta(t); });
    EXPECT_TRUE(meta.device().is_meta());
    EXPECT_EQ(meta.sizes(), cpu.sizes());
    EXPECT_EQ(meta.dtype(), cpu.dtype());
  }
  // Data-dependent shapes have no meta kernel; boolean masks in index raise.
  ExpectError<NotImplementedError>([&] { Call("aten::nonzero", ToMeta(x)); }, "Meta");
  ExpectError<NotImplementedError>([&] { Call("aten::index.Tensor", ToMeta(x), OptionalTensorList{ToMeta(B({1, 0, 1}))}); },
                                   "data-dependent");
}

TEST(MetaOps, SchemasRoundTrip) {
  int checked = 0;
  for (const char* family : {"cat", "stack", "split", "chunk", "gather", "scatter", "index", "masked", "where",
                             "nonzero", "tril", "triu", "sort", "argsort", "topk", "one_hot", "pad", "repeat", "flip",
                             "roll", "clamp", "lerp", "addc", "cum", "eye", "linspace", "rand", "normal_",
                             "uniform_", "bernoulli", "random_"}) {
    for (Op* op : Registry::Get().ops()) {
      if (op->base_name().rfind(family, 0) != 0) continue;
      const std::string text = op->schema().str();
      EXPECT_EQ(ParseSchema(text).str(), text);
      ++checked;
    }
  }
  EXPECT_GT(checked, 80);
  EXPECT_EQ(Registry::Get().FindOrThrow("aten::randint.low").schema().str(),
            "aten::randint.low(SymInt low, SymInt high, SymInt[] size, *, ScalarType? dtype=long, Layout? layout=None, "
            "Device? device=None, bool? pin_memory=None) -> Tensor");
  EXPECT_EQ(Registry::Get().FindOrThrow("aten::pad").schema().str(),
            "aten::pad(Tensor self, SymInt[] pad, str mode=\"constant\", float? value=None) -> Tensor");
  EXPECT_EQ(Registry::Get().FindOrThrow("aten::uniform_").schema().str(),
            "aten::uniform_(Tensor(a!) self, float from=0., float to=1., *, Generator? generator=None) -> Tensor(a!)");
  EXPECT_TRUE(Registry::Get().FindOrThrow("aten::randn").has_tag(Tag::nondeterministic_seeded));
  EXPECT_TRUE(Registry::Get().FindOrThrow("aten::nonzero").has_tag(Tag::dynamic_output_shape));
  EXPECT_TRUE(Registry::Get().FindOrThrow("aten::masked_fill_.Scalar").has_tag(Tag::inplace));
}

}  // namespace
}  // namespace kiln
