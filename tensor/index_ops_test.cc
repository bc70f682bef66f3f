// tensor/index_ops_test.cc: hand-checked cases for the index, shape and random op families
// (tensor/ops/index.cc, shape_ops.cc, random.cc), including their error messages.
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "gtest/gtest.h"
#include "runtime/thread_pool.h"
#include "tensor/ops/common.h"

namespace kiln {
namespace {

using TL = std::vector<Tensor>;
using SL = std::vector<SymInt>;

template <typename T>
Tensor Make(const std::vector<T>& v, DimVector shape) {
  Tensor t = EmptyTensor(shape, CppTypeToScalarType<T>::value, Device());
  EXPECT_EQ(t.numel(), static_cast<int64_t>(v.size()));
  if (!v.empty()) std::memcpy(t.raw_data(), v.data(), v.size() * sizeof(T));
  return t;
}
Tensor F(const std::vector<float>& v, DimVector shape) { return Make<float>(v, shape); }
Tensor F(const std::vector<float>& v) { return Make<float>(v, {static_cast<int64_t>(v.size())}); }
Tensor L(const std::vector<int64_t>& v, DimVector shape) { return Make<int64_t>(v, shape); }
Tensor L(const std::vector<int64_t>& v) { return Make<int64_t>(v, {static_cast<int64_t>(v.size())}); }
Tensor B(const std::vector<uint8_t>& v, DimVector shape) {
  Tensor t = EmptyTensor(shape, ScalarType::Bool, Device());
  for (size_t i = 0; i < v.size(); ++i) t.data_ptr<bool>()[i] = v[i] != 0;
  return t;
}
Tensor B(const std::vector<uint8_t>& v) { return B(v, {static_cast<int64_t>(v.size())}); }

template <typename T>
std::vector<T> Vec(const Tensor& t) {
  Tensor c = ops::contiguous(ops::to_dtype(t, CppTypeToScalarType<T>::value));
  const T* p = c.data_ptr<T>();
  return std::vector<T>(p, p + c.numel());
}
std::vector<float> FV(const Tensor& t) { return Vec<float>(t); }
std::vector<int64_t> LV(const Tensor& t) { return Vec<int64_t>(t); }
DimVector Shape(std::initializer_list<int64_t> s) { return DimVector(s); }
Tensor Arange(int64_t n, ScalarType dtype = ScalarType::Float32) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.f);
  return ops::to_dtype(F(v), dtype);
}

template <typename R = Tensor, typename... A>
R Call(const char* name, A&&... args) {
  return CallOp<R>(Registry::Get().FindOrThrow(name), std::forward<A>(args)...);
}

// Runs `fn`, expecting exception type E whose message contains `needle`.
template <typename E, typename Fn>
void ExpectError(Fn fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

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
  ExpectError<IndexError>([&] { Call("aten::gather", x, int64_t(1), L({0, 2}, {1, 2}), false); },
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
  ExpectError<IndexError>([&] { Call("aten::scatter.value", zeros, int64_t(1), L({3}, {1, 1}), Scalar(1.0)); },
                          "index 3 is out of bounds for dimension 1 with size 3");
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
  // values with extra leading 1s; values aliasing self are read before writing
  Call("aten::index_put_", x, OptionalTensorList{L({1})}, F({7, 8, 9}, {1, 1, 3}), false);
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

// --- shape_ops.cc ---------------------------------------------------------------------------

using OptDtype = std::optional<ScalarType>;
using OptScalar = std::optional<Scalar>;
using OptT = std::optional<Tensor>;
using TT = std::tuple<Tensor, Tensor>;
const float kNan = std::numeric_limits<float>::quiet_NaN();

TEST(ShapeOps, TrilTriu) {
  Tensor x = ops::view(Arange(9), {3, 3});
  EXPECT_EQ(FV(Call("aten::tril", x, int64_t(0))), (std::vector<float>{0, 0, 0, 3, 4, 0, 6, 7, 8}));
  EXPECT_EQ(FV(Call("aten::triu", x, int64_t(1))), (std::vector<float>{0, 1, 2, 0, 0, 5, 0, 0, 0}));
  EXPECT_EQ(FV(Call("aten::tril", x, int64_t(-1))), (std::vector<float>{0, 0, 0, 3, 0, 0, 6, 7, 0}));
  Tensor y = ops::clone(x);
  Tensor yt = ops::transpose(y, 0, 1);
  Call("aten::triu_", yt, int64_t(0));  // upper of the transpose = lower of y
  EXPECT_EQ(FV(y), (std::vector<float>{0, 0, 0, 3, 4, 0, 6, 7, 8}));
  ExpectError<Error>([] { Call("aten::tril", F({1, 2}), int64_t(0)); },
                     "tril: input tensor must have at least 2 dimensions");
}

TEST(ShapeOps, SortIsStableWithNanLargest) {
  Tensor x = F({3, kNan, 1, 2, 1});
  auto [v, i] = Call<TT>("aten::sort", x, int64_t(-1), false);
  EXPECT_EQ(LV(i), (std::vector<int64_t>{2, 4, 3, 0, 1}));
  EXPECT_TRUE(std::isnan(FV(v)[4]));
  auto [vd, id] = Call<TT>("aten::sort", x, int64_t(0), true);
  EXPECT_EQ(LV(id), (std::vector<int64_t>{1, 0, 3, 2, 4}));
  Tensor m = F({3, 1, 2, 4}, {2, 2});
  auto [mv, mi] = Call<TT>("aten::sort", m, int64_t(0), false);
  EXPECT_EQ(FV(mv), (std::vector<float>{2, 1, 3, 4}));
  EXPECT_EQ(LV(mi), (std::vector<int64_t>{1, 0, 0, 1}));
  EXPECT_EQ(LV(Call("aten::argsort", F({2, 0, 1}), int64_t(-1), true)), (std::vector<int64_t>{0, 2, 1}));
  auto [sv, si] = Call<TT>("aten::sort.stable", L({5, 3, 5}), std::optional<bool>(true), int64_t(-1), false);
  EXPECT_EQ(LV(sv), (std::vector<int64_t>{3, 5, 5}));
  EXPECT_EQ(LV(si), (std::vector<int64_t>{1, 0, 2}));
}

TEST(ShapeOps, Topk) {
  Tensor x = F({1, 5, 3, 5});
  auto [v, i] = Call<TT>("aten::topk", x, SymInt(2), int64_t(-1), true, true);
  EXPECT_EQ(FV(v), (std::vector<float>{5, 5}));
  EXPECT_EQ(LV(i), (std::vector<int64_t>{1, 3}));
  auto [vs, is] = Call<TT>("aten::topk", x, SymInt(3), int64_t(0), false, true);
  EXPECT_EQ(FV(vs), (std::vector<float>{1, 3, 5}));
  EXPECT_EQ(LV(is), (std::vector<int64_t>{0, 2, 1}));
  ExpectError<Error>([&] { Call<TT>("aten::topk", x, SymInt(5), int64_t(-1), true, true); },
                     "selected index k out of range");
}

TEST(ShapeOps, OneHot) {
  Tensor out = Call("aten::one_hot", L({0, 2}), int64_t(-1));
  EXPECT_EQ(out.sizes(), Shape({2, 3}));
  EXPECT_EQ(LV(out), (std::vector<int64_t>{1, 0, 0, 0, 0, 1}));
  EXPECT_EQ(Call("aten::one_hot", L({1}, {1, 1}), int64_t(4)).sizes(), Shape({1, 1, 4}));
  ExpectError<Error>([] { Call("aten::one_hot", L({-1}), int64_t(3)); }, "Class values must be non-negative.");
  ExpectError<Error>([] { Call("aten::one_hot", L({3}), int64_t(3)); }, "Class values must be smaller than num_classes.");
  ExpectError<Error>([] { Call("aten::one_hot", F({1}), int64_t(3)); },
                     "one_hot is only applicable to index tensor of type LongTensor.");
}

TEST(ShapeOps, Padding) {
  Tensor x = F({1, 2, 3, 4}, {2, 2});
  Tensor c = Call("aten::constant_pad_nd", x, SL{1, 0, 0, 1}, Scalar(9.0));
  EXPECT_EQ(c.sizes(), Shape({3, 3}));
  EXPECT_EQ(FV(c), (std::vector<float>{9, 1, 2, 9, 3, 4, 9, 9, 9}));
  EXPECT_EQ(FV(Call("aten::constant_pad_nd", F({1, 2, 3}), SL{-1, 1}, Scalar(int64_t(0)))),
            (std::vector<float>{2, 3, 0}));
  Tensor v = F({1, 2, 3}, {1, 3});
  using OptD = std::optional<double>;
  EXPECT_EQ(FV(Call("aten::pad", v, SL{2, 1}, std::string("reflect"), OptD())), (std::vector<float>{3, 2, 1, 2, 3, 2}));
  EXPECT_EQ(FV(Call("aten::pad", v, SL{2, 1}, std::string("replicate"), OptD())), (std::vector<float>{1, 1, 1, 2, 3, 3}));
  EXPECT_EQ(FV(Call("aten::pad", v, SL{2, 1}, std::string("circular"), OptD())), (std::vector<float>{2, 3, 1, 2, 3, 1}));
  EXPECT_EQ(FV(Call("aten::pad", v, SL{1, 0}, std::string("constant"), OptD(-1.0))), (std::vector<float>{-1, 1, 2, 3}));
  // reflect over the last two dims
  Tensor r = Call("aten::pad", x, SL{1, 0, 1, 0}, std::string("reflect"), OptD());
  EXPECT_EQ(FV(r), (std::vector<float>{4, 3, 4, 2, 1, 2, 4, 3, 4}));
  ExpectError<Error>([&] { Call("aten::pad", v, SL{3, 0}, std::string("reflect"), OptD()); },
                     "Padding size should be less than the corresponding input dimension, but got: padding (3, 0) at "
                     "dimension 1 of input [1, 3]");
  ExpectError<Error>([&] { Call("aten::constant_pad_nd", x, SL{1}, Scalar(0.0)); },
                     "Length of pad must be even but instead it equals 1");
  ExpectError<Error>([&] { Call("aten::constant_pad_nd", x, SL{1, 1, 1, 1, 1, 1}, Scalar(0.0)); },
                     "Pad length is 6 while the input has 2 dimensions.");
  ExpectError<Error>([&] { Call("aten::constant_pad_nd", x, SL{-2, -1}, Scalar(0.0)); },
                     "The input size 2, plus negative padding -2 and -1 resulted in a negative output size");
  ExpectError<NotImplementedError>([&] { Call("aten::pad", v, SL{1, 1}, std::string("wrap"), OptD()); },
                                   "Unrecognised padding mode wrap");
}

TEST(ShapeOps, RepeatFlipRoll) {
  Tensor r = Call("aten::repeat", F({1, 2}), SL{2, 2});
  EXPECT_EQ(r.sizes(), Shape({2, 4}));
  EXPECT_EQ(FV(r), (std::vector<float>{1, 2, 1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(FV(Call("aten::repeat", ops::transpose(F({1, 2}, {1, 2}), 0, 1), SL{1, 2})),
            (std::vector<float>{1, 1, 2, 2}));
  ExpectError<Error>([] { Call("aten::repeat", F({1, 2}, {1, 2}), SL{2}); },
                     "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
  Tensor x = ops::view(Arange(6), {2, 3});
  EXPECT_EQ(FV(Call("aten::flip", x, std::vector<int64_t>{0, 1})), (std::vector<float>{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(FV(Call("aten::flip", x, std::vector<int64_t>{-1})), (std::vector<float>{2, 1, 0, 5, 4, 3}));
  ExpectError<Error>([&] { Call("aten::flip", x, std::vector<int64_t>{0, -2}); },
                     "dim 0 appears multiple times in the list of dims");
  EXPECT_EQ(FV(Call("aten::roll", Arange(5), SL{2}, SL{})), (std::vector<float>{3, 4, 0, 1, 2}));
  EXPECT_EQ(FV(Call("aten::roll", x, SL{1}, SL{1})), (std::vector<float>{2, 0, 1, 5, 3, 4}));
  EXPECT_EQ(FV(Call("aten::roll", x, SL{-1}, SL{})), (std::vector<float>{1, 2, 3, 4, 5, 0}));
  EXPECT_EQ(FV(Call("aten::roll", x, SL{1, 1}, SL{0, 1})), (std::vector<float>{5, 3, 4, 2, 0, 1}));
  ExpectError<Error>([&] { Call("aten::roll", x, SL{1, 2}, SL{0}); }, "shifts and dimensions must align. shifts: 2, dims:1");
}

TEST(ShapeOps, Clamp) {
  Tensor x = F({-2, 0.5, 3, kNan});
  std::vector<float> c = FV(Call("aten::clamp", x, OptScalar(0.0), OptScalar(1.0)));
  EXPECT_EQ(c[0], 0);
  EXPECT_EQ(c[1], 0.5);
  EXPECT_EQ(c[2], 1);
  EXPECT_TRUE(std::isnan(c[3]));
  Tensor i = Call("aten::clamp", L({-5, 5}), OptScalar(0.5), OptScalar());
  EXPECT_EQ(i.dtype(), ScalarType::Float32);
  EXPECT_EQ(FV(i), (std::vector<float>{0.5, 5}));
  EXPECT_EQ(LV(Call("aten::clamp_max", L({-5, 5}), Scalar(int64_t(2)))), (std::vector<int64_t>{-5, 2}));
  EXPECT_EQ(FV(Call("aten::clamp_min", F({-1, 1}), Scalar(int64_t(0)))), (std::vector<float>{0, 1}));
  // min > max gives max
  EXPECT_EQ(FV(Call("aten::clamp", F({0, 5}), OptScalar(3.0), OptScalar(2.0))), (std::vector<float>{2, 2}));
  Tensor t = Call("aten::clamp.Tensor", F({0, 5, 10}), OptT(F({1}, {})), OptT(F({4, 4, 8})));
  EXPECT_EQ(FV(t), (std::vector<float>{1, 4, 8}));
  Tensor y = F({-1, 2});
  Call("aten::clamp_", y, OptScalar(0.0), OptScalar());
  EXPECT_EQ(FV(y), (std::vector<float>{0, 2}));
  ExpectError<Error>([] { Call("aten::clamp", F({1}), OptScalar(), OptScalar()); },
                     "torch.clamp: At least one of 'min' or 'max' must not be None");
  ExpectError<Error>([] { Call("aten::clamp_", L({1}), OptScalar(0.5), OptScalar()); },
                     "result type Float can't be cast to the desired output type Long");
}

TEST(ShapeOps, LerpAddcmulAddcdiv) {
  EXPECT_EQ(FV(Call("aten::lerp.Scalar", F({0, 4}), F({10, 8}), Scalar(0.25))), (std::vector<float>{2.5, 5}));
  EXPECT_EQ(FV(Call("aten::lerp.Tensor", F({0, 4}), F({10, 8}), F({0, 1}))), (std::vector<float>{0, 8}));
  ExpectError<Error>([] { Call("aten::lerp.Scalar", F({0}), ops::to_dtype(F({1}), ScalarType::Float64), Scalar(0.5)); },
                     "expected dtype Float for `end` but got dtype Double");
  Tensor s = F({1, 1});
  EXPECT_EQ(FV(Call("aten::addcmul", s, F({2, 3}), F({4, 5}), Scalar(0.5))), (std::vector<float>{5, 8.5}));
  EXPECT_EQ(FV(Call("aten::addcdiv", s, F({2, 3}), F({4, 5}), Scalar(0.5))), (std::vector<float>{1.25, 1.3f}));
  Call("aten::addcmul_", s, F({1}), F({2}), Scalar(int64_t(1)));
  EXPECT_EQ(FV(s), (std::vector<float>{3, 3}));
  EXPECT_EQ(LV(Call("aten::addcmul", L({1}), L({2}), L({3}), Scalar(int64_t(2)))), (std::vector<int64_t>{13}));
  ExpectError<Error>([] { Call("aten::addcdiv", L({1}), L({2}), L({3}), Scalar(int64_t(1))); },
                     "Integer division with addcdiv is no longer supported");
}

TEST(ShapeOps, CumsumCumprod) {
  EXPECT_EQ(FV(Call("aten::cumsum", F({1, 2, 3}), int64_t(0), OptDtype())), (std::vector<float>{1, 3, 6}));
  Tensor i = Call("aten::cumsum", ops::to_dtype(L({1, 2, 3}), ScalarType::Int32), int64_t(0), OptDtype());
  EXPECT_EQ(i.dtype(), ScalarType::Int64);
  Tensor m = ops::view(Arange(6), {2, 3});
  EXPECT_EQ(FV(Call("aten::cumsum", m, int64_t(0), OptDtype())), (std::vector<float>{0, 1, 2, 3, 5, 7}));
  EXPECT_EQ(FV(Call("aten::cumsum", ops::transpose(m, 0, 1), int64_t(1), OptDtype())),
            (std::vector<float>{0, 3, 1, 5, 2, 7}));
  EXPECT_EQ(FV(Call("aten::cumprod", F({1, 2, 3}), int64_t(-1), OptDtype())), (std::vector<float>{1, 2, 6}));
  Tensor d = Call("aten::cumsum", F({1, 2}), int64_t(0), OptDtype(ScalarType::Float64));
  EXPECT_EQ(d.dtype(), ScalarType::Float64);
  Tensor y = F({1, 2, 3});
  Call("aten::cumsum_", y, int64_t(0), OptDtype());
  EXPECT_EQ(FV(y), (std::vector<float>{1, 3, 6}));
  ExpectError<IndexError>([] { Call("aten::cumsum", F({1}), int64_t(1), OptDtype()); }, "Dimension out of range");
}

TEST(ShapeOps, EyeLinspace) {
  using OptLayout = std::optional<Layout>;
  using OptDevice = std::optional<Device>;
  using OptBool = std::optional<bool>;
  Tensor e = Call("aten::eye.m", SymInt(2), SymInt(3), OptDtype(), OptLayout(), OptDevice(), OptBool());
  EXPECT_EQ(e.sizes(), Shape({2, 3}));
  EXPECT_EQ(FV(e), (std::vector<float>{1, 0, 0, 0, 1, 0}));
  Tensor el = Call("aten::eye", SymInt(2), OptDtype(ScalarType::Int64), OptLayout(), OptDevice(), OptBool());
  EXPECT_EQ(LV(el), (std::vector<int64_t>{1, 0, 0, 1}));
  Tensor em = Call("aten::eye", SymInt(4), OptDtype(), OptLayout(), OptDevice(Device(DeviceType::Meta)), OptBool());
  EXPECT_TRUE(em.device().is_meta());
  ExpectError<Error>([] { Call("aten::eye", SymInt(-1), OptDtype(), OptLayout(), OptDevice(), OptBool()); },
                     "n must be greater or equal to 0, got -1");
  Tensor l = Call("aten::linspace", Scalar(0.0), Scalar(1.0), int64_t(5), OptDtype(), OptLayout(), OptDevice(), OptBool());
  EXPECT_EQ(FV(l), (std::vector<float>{0, 0.25, 0.5, 0.75, 1}));
  Tensor li = Call("aten::linspace", Scalar(int64_t(0)), Scalar(int64_t(10)), int64_t(3), OptDtype(ScalarType::Int64),
                   OptLayout(), OptDevice(), OptBool());
  EXPECT_EQ(LV(li), (std::vector<int64_t>{0, 5, 10}));
  ExpectError<Error>([] { Call("aten::linspace", Scalar(0.0), Scalar(1.0), int64_t(-1), OptDtype(), std::optional<Layout>(),
                               std::optional<Device>(), std::optional<bool>()); },
                     "number of steps must be non-negative");
}

// --- random.cc ------------------------------------------------------------------------------

using OptGen = std::optional<Generator>;
using OptLayout = std::optional<Layout>;
using OptDevice = std::optional<Device>;
using OptBool = std::optional<bool>;
using OptMF = std::optional<MemoryFormat>;

Tensor Randn(const SL& size, OptGen g = std::nullopt, ScalarType dtype = ScalarType::Float32, Device dev = Device()) {
  return Call("aten::randn.generator", size, g, OptDtype(dtype), OptLayout(), OptDevice(dev), OptBool());
}
Tensor Rand(const SL& size, OptGen g = std::nullopt, ScalarType dtype = ScalarType::Float32) {
  return Call("aten::rand.generator", size, g, OptDtype(dtype), OptLayout(), OptDevice(), OptBool());
}
std::pair<double, double> MeanVar(const std::vector<double>& v) {
  double m = 0, q = 0;
  for (double x : v) m += x;
  m /= v.size();
  for (double x : v) q += (x - m) * (x - m);
  return {m, q / v.size()};
}

TEST(RandomOps, ManualSeedReproduces) {
  DefaultCPUGenerator()->manual_seed(42);
  std::vector<float> a = FV(Call("aten::randn", SL{1000}, OptDtype(), OptLayout(), OptDevice(), OptBool()));
  std::vector<float> a2 = FV(Call("aten::randn", SL{1000}, OptDtype(), OptLayout(), OptDevice(), OptBool()));
  DefaultCPUGenerator()->manual_seed(42);
  std::vector<float> b = FV(Call("aten::randn", SL{1000}, OptDtype(), OptLayout(), OptDevice(), OptBool()));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, a2);
  // An explicit generator is its own stream and leaves the default one alone.
  uint64_t before = DefaultCPUGenerator()->offset();
  Generator g1 = std::make_shared<GeneratorImpl>(7), g2 = std::make_shared<GeneratorImpl>(7);
  EXPECT_EQ(FV(Rand({64}, g1)), FV(Rand({64}, g2)));
  EXPECT_EQ(DefaultCPUGenerator()->offset(), before);
  EXPECT_GT(g1->offset(), 0u);
}

TEST(RandomOps, ParallelResultsDependOnlyOnSeed) {
  const int saved = GetNumThreads();
  std::vector<std::vector<float>> runs;
  for (int threads : {1, 2, 3}) {
    SetNumThreads(threads);
    Generator g = std::make_shared<GeneratorImpl>(123);
    Tensor x = Randn({1 << 18}, g);
    Tensor u = Rand({1 << 18}, g);
    std::vector<float> v = FV(x), w = FV(u);
    v.insert(v.end(), w.begin(), w.end());
    runs.push_back(v);
  }
  SetNumThreads(saved);
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
}

TEST(RandomOps, Distributions) {
  Generator g = std::make_shared<GeneratorImpl>(2024);
  for (ScalarType t : {ScalarType::Float32, ScalarType::Float64}) {
    auto [m, v] = MeanVar(Vec<double>(Randn({200000}, g, t)));
    EXPECT_NEAR(m, 0.0, 0.01);
    EXPECT_NEAR(v, 1.0, 0.02);
  }
  Tensor u = Call("aten::uniform_", ops::empty({SymInt(100000)}, ScalarType::Float32), 2.0, 5.0, OptGen(g));
  std::vector<double> uv = Vec<double>(u);
  EXPECT_GE(*std::min_element(uv.begin(), uv.end()), 2.0);
  EXPECT_LT(*std::max_element(uv.begin(), uv.end()), 5.0);
  EXPECT_NEAR(MeanVar(uv).first, 3.5, 0.02);
  Tensor n = Call("aten::normal_", ops::empty({SymInt(100000)}, ScalarType::Float64), 3.0, 2.0, OptGen(g));
  auto [nm, nv] = MeanVar(Vec<double>(n));
  EXPECT_NEAR(nm, 3.0, 0.03);
  EXPECT_NEAR(nv, 4.0, 0.1);
  Tensor b = Call("aten::bernoulli.p", ops::empty({SymInt(100000)}, ScalarType::Float32), 0.3, OptGen(g));
  EXPECT_NEAR(MeanVar(Vec<double>(b)).first, 0.3, 0.01);
  EXPECT_EQ(FV(Call("aten::bernoulli", F({0, 1, 0, 1}), OptGen(g))), (std::vector<float>{0, 1, 0, 1}));
  Tensor hb = Call("aten::rand.generator", SL{1000}, OptGen(g), OptDtype(ScalarType::BFloat16), OptLayout(),
                   OptDevice(), OptBool());
  EXPECT_EQ(hb.dtype(), ScalarType::BFloat16);
}

TEST(RandomOps, IntegersAndPermutations) {
  Generator g = std::make_shared<GeneratorImpl>(5);
  Tensor r = Call("aten::randint.low_generator", SymInt(3), SymInt(7), SL{1000}, OptGen(g), OptDtype(), OptLayout(),
                  OptDevice(), OptBool());
  EXPECT_EQ(r.dtype(), ScalarType::Int64);
  std::vector<int64_t> rv = LV(r);
  std::set<int64_t> seen(rv.begin(), rv.end());
  EXPECT_EQ(seen, (std::set<int64_t>{3, 4, 5, 6}));
  Tensor r2 = Call("aten::randint", SymInt(2), SL{2, 3}, OptDtype(ScalarType::Int32), OptLayout(), OptDevice(),
                   OptBool());
  EXPECT_EQ(r2.dtype(), ScalarType::Int32);
  EXPECT_EQ(r2.sizes(), Shape({2, 3}));
  ExpectError<Error>([] { Call("aten::randint.low", SymInt(5), SymInt(3), SL{2}, OptDtype(), OptLayout(), OptDevice(),
                               OptBool()); },
                     "random_ expects 'from' to be less than 'to', but got from=5 >= to=3");
  Tensor bits = Call("aten::random_", ops::empty({SymInt(100)}, ScalarType::Bool), OptGen(g));
  std::vector<int64_t> bv = LV(bits);
  EXPECT_EQ(std::set<int64_t>(bv.begin(), bv.end()), (std::set<int64_t>{0, 1}));
  std::vector<int64_t> tv = LV(Call("aten::random_.to", ops::empty({SymInt(100)}, ScalarType::Int32), int64_t(5), OptGen(g)));
  EXPECT_LT(*std::max_element(tv.begin(), tv.end()), 5);
  EXPECT_GE(*std::min_element(tv.begin(), tv.end()), 0);
  Generator p1 = std::make_shared<GeneratorImpl>(9), p2 = std::make_shared<GeneratorImpl>(9);
  std::vector<int64_t> perm = LV(Call("aten::randperm.generator", SymInt(10), OptGen(p1), OptDtype(), OptLayout(),
                                      OptDevice(), OptBool()));
  std::vector<int64_t> perm2 = LV(Call("aten::randperm.generator", SymInt(10), OptGen(p2), OptDtype(), OptLayout(),
                                       OptDevice(), OptBool()));
  EXPECT_EQ(perm, perm2);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, LV(Arange(10, ScalarType::Int64)));
  EXPECT_NE(perm, sorted);
  ExpectError<Error>([] { Call("aten::randperm", SymInt(-1), OptDtype(), OptLayout(), OptDevice(), OptBool()); },
                     "n must be non-negative, got-1");
}

TEST(RandomOps, InPlaceOnViewsLikeAndMeta) {
  // Sampling into a transposed view fills it in its own row-major order.
  Generator g1 = std::make_shared<GeneratorImpl>(11), g2 = std::make_shared<GeneratorImpl>(11);
  Tensor base = ops::empty({SymInt(3), SymInt(4)}, ScalarType::Float32);
  Tensor view = ops::transpose(base, 0, 1);
  Call("aten::normal_", view, 0.0, 1.0, OptGen(g1));
  EXPECT_EQ(FV(view), FV(Randn({4, 3}, g2)));
  Tensor like = Call("aten::randn_like.generator", view, OptGen(g1), OptDtype(ScalarType::Float64), OptLayout(),
                     OptDevice(), OptBool(), OptMF());
  EXPECT_EQ(like.sizes(), Shape({4, 3}));
  EXPECT_EQ(like.dtype(), ScalarType::Float64);
  Tensor ri = Call("aten::randint_like.low_dtype", L({0, 0, 0}), SymInt(10), SymInt(12), OptDtype(), OptLayout(),
                   OptDevice(), OptBool(), OptMF());
  for (int64_t v : LV(ri)) EXPECT_TRUE(v == 10 || v == 11);
  std::vector<float> rl = FV(Call("aten::rand_like", F({0, 0}), OptDtype(), OptLayout(), OptDevice(), OptBool(), OptMF()));
  for (float v : rl) EXPECT_TRUE(v >= 0 && v < 1);
  // Meta tensors get shapes and draw nothing.
  Generator gm = std::make_shared<GeneratorImpl>(1);
  Tensor m = Randn({5, 2}, gm, ScalarType::Float32, Device(DeviceType::Meta));
  EXPECT_TRUE(m.device().is_meta());
  EXPECT_EQ(m.sizes(), Shape({5, 2}));
  EXPECT_EQ(gm->offset(), 0u);
}

TEST(RandomOps, Errors) {
  ExpectError<Error>([] { Call("aten::uniform_", F({0}), 2.0, 1.0, OptGen()); },
                     "uniform_ expects to return a [from, to) range, but found from=2 > to=1");
  ExpectError<Error>([] { Call("aten::normal_", F({0}), 0.0, -1.0, OptGen()); },
                     "normal expects std >= 0.0, but found std -1");
  ExpectError<Error>([] { Call("aten::rand", SL{2}, OptDtype(ScalarType::Int64), OptLayout(), OptDevice(), OptBool()); },
                     "\"check_uniform_bounds\" not implemented for 'Long'");
  ExpectError<Error>([] { Call("aten::bernoulli_.float", F({0}), 2.0, OptGen()); },
                     "bernoulli_ expects p to be in [0, 1], but got p=2");
  ExpectError<Error>([] { Call("aten::bernoulli", F({1.5}), OptGen()); },
                     "Expected p_in >= 0 && p_in <= 1 to be true, but got false.");
}

}  // namespace
}  // namespace kiln
