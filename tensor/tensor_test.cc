// tensor/tensor_test.cc: the tensor core's contracts: schemas, dispatch order and fallthrough,
// TensorImpl and view semantics, the promotion table, and kernels on strided inputs.
#include <cmath>

#include "gtest/gtest.h"
#include "tensor/ops/common.h"
#include "tensor/vec_math.h"

namespace kiln {
namespace {

std::vector<SymInt> Shape(std::initializer_list<int64_t> s) { return std::vector<SymInt>(s.begin(), s.end()); }

Tensor Arange(int64_t n, ScalarType dtype = ScalarType::Float32) {
  return CallOp<Tensor>(KILN_OP("aten::arange"), Scalar(n), std::optional<ScalarType>(dtype),
                        std::optional<Layout>(), std::optional<Device>(), std::optional<bool>());
}

template <typename T>
std::vector<T> Values(const Tensor& t) {
  Tensor c = ops::contiguous(t);
  return std::vector<T>(c.data_ptr<T>(), c.data_ptr<T>() + c.numel());
}

// --- schemas -----------------------------------------------------------------------------------

TEST(Schema, ParsesArgumentsDefaultsAndAliases) {
  FunctionSchema s = ParseSchema("add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)");
  EXPECT_EQ(s.name, "aten::add_");
  EXPECT_EQ(s.overload, "Tensor");
  ASSERT_EQ(s.arguments.size(), 3u);
  EXPECT_TRUE(s.arguments[0].alias.is_write);
  EXPECT_EQ(s.arguments[0].alias.set, "a");
  EXPECT_FALSE(s.arguments[1].kwarg_only);
  EXPECT_TRUE(s.arguments[2].kwarg_only);
  EXPECT_EQ(s.arguments[2].default_value->to_scalar().to_int(), 1);
  EXPECT_TRUE(s.is_mutable());
}

TEST(Schema, ListsOptionalsAndTuples) {
  FunctionSchema s = ParseSchema(
      "max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
      "int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)");
  EXPECT_EQ(s.arguments[1].kind, TypeKind::IntList);
  EXPECT_EQ(s.arguments[1].list_size, 2);
  EXPECT_EQ(s.arguments[3].default_value->to_int_list(), (std::vector<int64_t>{0, 0}));
  EXPECT_TRUE(s.returns_tuple);
  EXPECT_EQ(s.returns.size(), 2u);
  FunctionSchema o = ParseSchema("index.Tensor(Tensor self, Tensor?[] indices) -> Tensor");
  EXPECT_EQ(o.arguments[1].kind, TypeKind::OptionalTensorList);
  FunctionSchema n = ParseSchema("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)");
  EXPECT_EQ(n.returns[1].name, "indices");
}

TEST(Schema, RoundTripsThroughStr) {
  for (const char* text : {"add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
                           "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
                           "div.Tensor_mode(Tensor self, Tensor other, *, str? rounding_mode) -> Tensor"}) {
    EXPECT_EQ(ParseSchema(text).str(), std::string("aten::") + text);
  }
}

TEST(Schema, RejectsMalformedText) {
  EXPECT_THROW(ParseSchema("add(Tensor self"), Error);
  EXPECT_THROW(ParseSchema("add(Frob self) -> Tensor"), Error);
}

// --- dispatcher ------------------------------------------------------------------------------

TEST(DispatchKeySet, HighestKeyWins) {
  DispatchKeySet ks = DispatchKeySet(DispatchKey::CPU).add(DispatchKey::Autograd).add(DispatchKey::Tracing);
  EXPECT_EQ(ks.highest(), DispatchKey::Autograd);
  EXPECT_EQ(ks.remove(DispatchKey::Autograd).highest(), DispatchKey::Tracing);
  EXPECT_EQ((ks & DispatchKeySet::Below(DispatchKey::Tracing)).highest(), DispatchKey::CPU);
  EXPECT_LT(static_cast<int>(DispatchKey::Fake), static_cast<int>(DispatchKey::Tracing));
  EXPECT_LT(static_cast<int>(DispatchKey::Autograd), static_cast<int>(DispatchKey::Functionalize));
}

int g_tracing_calls = 0;
void CountingTracingKernel(const Op& op, DispatchKeySet ks, Stack& s, void*) {
  ++g_tracing_calls;
  op.Redispatch(ks.remove(DispatchKey::Tracing), s);
}

TEST(Dispatcher, FallthroughAndRedispatch) {
  Tensor x = ops::full(Shape({2}), Scalar(1.0), ScalarType::Float32);
  // Autograd and Tracing keys on the TLS fall through to CPU for ops that have no kernel there.
  IncludeDispatchKeyGuard g1(DispatchKey::Autograd);
  Tensor y = ops::add(x, x);
  EXPECT_EQ(Values<float>(y), (std::vector<float>{2, 2}));
  // A layer kernel registered at Tracing runs first, then re-dispatches below itself.
  Op& op = const_cast<Op&>(KILN_OP("aten::mul.Tensor"));
  op.SetKernel(DispatchKey::Tracing, Kernel{&CountingTracingKernel, nullptr});
  {
    IncludeDispatchKeyGuard g2(DispatchKey::Tracing);
    Tensor z = ops::mul(x, x);
    EXPECT_EQ(Values<float>(z), (std::vector<float>{1, 1}));
  }
  EXPECT_EQ(g_tracing_calls, 1);
  op.SetKernel(DispatchKey::Tracing, Kernel{});
  ops::mul(x, x);
  EXPECT_EQ(g_tracing_calls, 1);
}

TEST(Dispatcher, MetaTensorsRunOnlyMetaFunctions) {
  Tensor m = ops::empty(Shape({4, 3}), ScalarType::Float32, Device(DeviceType::Meta));
  EXPECT_FALSE(m->has_storage());
  Tensor s = ops::add(m, ops::empty(Shape({3}), ScalarType::Float64, Device(DeviceType::Meta)));
  EXPECT_EQ(s.sizes(), (DimVector{4, 3}));
  EXPECT_EQ(s.dtype(), ScalarType::Float64);
  EXPECT_TRUE(s.device().is_meta());
  EXPECT_EQ(ops::sum(m, std::vector<int64_t>{0}).sizes(), (DimVector{3}));
}

Tensor CpuOnlyIdentity(const Tensor& self) { return self; }

TEST(Dispatcher, MissingBackendKernelRaisesNotImplemented) {
  // Every built-in op has a CUDA kernel: an op registered here for the CPU alone.
  Registry::Get().Def("_test_cpu_only(Tensor self) -> Tensor").Impl<&CpuOnlyIdentity>(DispatchKey::CPU);
  // A data-less tensor that dispatches to CUDA (no driver is needed to reach the dispatcher's check).
  auto impl = std::make_shared<TensorImpl>(nullptr, ScalarType::Float32, Device(DeviceType::CUDA, 0),
                                           DispatchKeySet(DispatchKey::CUDA));
  impl->set_sizes_and_strides(SymDimVector{SymInt(int64_t(2))}, SymDimVector{SymInt(int64_t(1))}, 0);
  Tensor t(std::move(impl));
  try {
    CallOp<Tensor>(KILN_OP("aten::_test_cpu_only"), t);
    FAIL() << "expected NotImplementedError";
  } catch (const NotImplementedError& e) {
    EXPECT_NE(std::string(e.what()).find("Could not run 'aten::_test_cpu_only' with arguments from the 'CUDA' backend"),
              std::string::npos) << e.what();
  }
}

TEST(Dispatcher, BoxedAndUnboxedCallsAgree) {
  Tensor x = Arange(4);
  Stack s{IValue(x), IValue(Scalar(int64_t(2))), IValue(Scalar(int64_t(1)))};
  KILN_OP("aten::add.Scalar").Call(s);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(Values<float>(s[0].to_tensor()), Values<float>(ops::add(x, Scalar(int64_t(2)))));
}

TEST(Dispatcher, InplaceOpsBumpVersion) {
  Tensor x = Arange(3);
  Tensor v = ops::view(x, Shape({3}));
  uint32_t before = x->version();
  ops::add_(v, x);
  EXPECT_EQ(x->version(), before + 1);  // views share the counter
  EXPECT_EQ(v->version(), before + 1);
}

// Note [Op aliases]: a second name belongs to the packet it names, with the variants torch gives it;
// an alias of an op not defined, of an op's own name, or declared twice is refused.
TEST(Dispatcher, AliasesBelongToTheOpsTheyName) {
  auto aliases_of = [](const std::string& name) {
    std::vector<std::pair<std::string, int>> out;
    for (const OpAlias& a : Registry::Get().FindPacket("aten::" + name)->aliases) out.emplace_back(a.name, a.variants);
    return out;
  };
  EXPECT_EQ(aliases_of("gt"), (std::vector<std::pair<std::string, int>>{{"greater", kFunctionAndMethod}}));
  EXPECT_EQ(aliases_of("gt_"), (std::vector<std::pair<std::string, int>>{{"greater_", kMethod}}));
  EXPECT_EQ(aliases_of("sigmoid"), (std::vector<std::pair<std::string, int>>{{"special_expit", kModuleOnly}}));
  Registry& r = Registry::Get();
  EXPECT_ANY_THROW(r.Alias("arcfoo", "foo"));        // no such op
  EXPECT_ANY_THROW(r.Alias("add", "sub"));           // an op's own name
  EXPECT_ANY_THROW(r.Alias("greater", "ge"));        // gt's already
  EXPECT_EQ(aliases_of("ge"), (std::vector<std::pair<std::string, int>>{{"greater_equal", kFunctionAndMethod}}));
}

// --- TensorImpl and views --------------------------------------------------------------------

TEST(Views, ShareStorageAndComputeStrides) {
  Tensor x = Arange(24);
  Tensor v = ops::view(x, Shape({2, 3, 4}));
  EXPECT_EQ(v->storage(), x->storage());
  EXPECT_EQ(v.strides(), (DimVector{12, 4, 1}));
  Tensor t = ops::transpose(v, 0, 2);
  EXPECT_EQ(t.sizes(), (DimVector{4, 3, 2}));
  EXPECT_EQ(t.strides(), (DimVector{1, 4, 12}));
  EXPECT_FALSE(t.is_contiguous());
  Tensor s = ops::select(v, 1, 2);
  EXPECT_EQ(s->storage_offset(), 8);
  Tensor sl = ops::slice(v, 2, 1, 4, 2);
  EXPECT_EQ(sl.sizes(), (DimVector{2, 3, 2}));
  EXPECT_EQ(sl.strides(), (DimVector{12, 4, 2}));
  EXPECT_EQ(Values<float>(ops::select(ops::select(sl, 0, 1), 0, 0)), (std::vector<float>{13, 15}));
  Tensor e = ops::expand(ops::unsqueeze(Arange(3), 0), Shape({4, 3}));
  EXPECT_EQ(e.strides(), (DimVector{0, 1}));
  EXPECT_THROW(ops::view(t, Shape({24})), Error);  // not viewable: reshape copies instead
  EXPECT_EQ(ops::reshape(t, Shape({24})).numel(), 24);
}

TEST(Views, ErrorsNameShapes) {
  Tensor x = Arange(6);
  try {
    ops::view(x, Shape({4, 2}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shape '[4, 2]' is invalid for input of size 6"), std::string::npos);
  }
  EXPECT_THROW(ops::select(x, 0, 6), IndexError);
  EXPECT_THROW(ops::transpose(x, 0, 3), IndexError);
}

// --- size arithmetic (Note [Storage size overflow] in empty.cc) -----------------------------------

// The message of the Error `fn` throws ("" when it throws none).
template <typename F>
std::string ErrorOf(F fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SizeArithmetic, OverflowingCountsRaiseInsteadOfWrapping) {
  const int64_t big = int64_t(1) << 62;
  EXPECT_EQ(ErrorOf([&] { EmptyTensor(DimVector{big}, ScalarType::Float32, Device(DeviceType::CPU)); }),
            "Storage size calculation overflowed with sizes=[4611686018427387904]");
  EXPECT_EQ(ErrorOf([&] { EmptyTensor(DimVector{big}, ScalarType::Float32, Device(DeviceType::Meta)); }),
            "Storage size calculation overflowed with sizes=[4611686018427387904]");
  EXPECT_EQ(ErrorOf([&] { StorageBytesFor({2, 3}, {-1, 1}, 0, 4); }),
            "Storage size calculation overflowed with sizes=[2, 3] and strides=[-1, 1]");
  EXPECT_EQ(StorageBytesFor({2, 3}, {3, 1}, 2, 4), 32);
  EXPECT_EQ(StorageBytesFor({big, 0}, {big, 1}, 0, 4), 0);  // empty: no bytes, whatever the strides
  EXPECT_EQ(ContiguousStorageBytesFor({big, 0, 4}, 4), 0);
  EXPECT_NE(ErrorOf([&] { ContiguousStorageBytesFor({4, big, 0}, 4); }), "");  // as torch: 4 * 2**62 overflows first
  EXPECT_EQ(ErrorOf([&] { ops::expand(Arange(2), Shape({big, 2})); }), "numel: integer multiplication overflow");
  EXPECT_NE(ErrorOf([&] { return SymInt(big) * SymInt(4); }).find("overflow"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { return SymInt(INT64_MAX) + SymInt(1); }).find("overflow"), std::string::npos);
  EXPECT_EQ((SymInt(big) * SymInt(0)).expect_int(), 0);
  EXPECT_NE(ErrorOf([&] { EmptyTensor(DimVector{-1}, ScalarType::Float32, Device(DeviceType::CPU)); })
                .find("negative dimension -1"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { ops::as_strided(Arange(4), Shape({2}), Shape({1}), SymInt(-1)); })
                .find("invalid storage offset -1"), std::string::npos);
}

TEST(Kernels, EmptyStridedWalksVisitNothing) {
  int calls = 0;
  ForEachStrided({3, 0, 4}, {{0, 0, 0}}, [&](const int64_t*, const int64_t*) { ++calls; });
  ParallelForEachStrided({0}, {{1}}, [&](const int64_t*, const int64_t*) { ++calls; });
  EXPECT_EQ(calls, 0);
}

// --- type promotion --------------------------------------------------------------------------

TEST(TypePromotion, TableMatchesPyTorch) {
  using S = ScalarType;
  EXPECT_EQ(PromoteTypes(S::UInt8, S::Int8), S::Int16);
  EXPECT_EQ(PromoteTypes(S::Bool, S::Int32), S::Int32);
  EXPECT_EQ(PromoteTypes(S::Float16, S::BFloat16), S::Float32);
  EXPECT_EQ(PromoteTypes(S::Int64, S::Float16), S::Float16);
  EXPECT_EQ(PromoteTypes(S::Float32, S::Float64), S::Float64);
}

TEST(TypePromotion, PythonNumbersAreWeak) {
  Tensor i8 = ops::full(Shape({2}), Scalar(int64_t(1)), ScalarType::Int8);
  EXPECT_EQ(ResultType(i8, Scalar(int64_t(1000))), ScalarType::Int8);
  EXPECT_EQ(ResultType(i8, Scalar(2.5)), ScalarType::Float32);
  Tensor f16 = ops::full(Shape({2}), Scalar(1.0), ScalarType::Float16);
  Tensor zero_dim_f64 = ops::scalar_tensor(Scalar(1.0), ScalarType::Float64);
  EXPECT_EQ(ResultType(f16, zero_dim_f64), ScalarType::Float16);
  Tensor zero_dim_i64 = ops::scalar_tensor(Scalar(int64_t(1)), ScalarType::Int64);
  EXPECT_EQ(ResultType(zero_dim_i64, Scalar(1.5)), ScalarType::Float32);
}

// --- kernels on strided inputs ---------------------------------------------------------------

TEST(Kernels, BinaryOnTransposedAndBroadcastInputs) {
  Tensor a = ops::view(Arange(6), Shape({2, 3}));
  Tensor at = ops::transpose(a, 0, 1);  // [3, 2], strides [1, 3]
  Tensor col = ops::view(Arange(3), Shape({3, 1}));
  Tensor r = ops::add(at, col);
  EXPECT_EQ(Values<float>(r), (std::vector<float>{0, 3, 2, 5, 4, 7}));
  Tensor stepped = ops::slice(Arange(10), 0, 0, 10, 3);  // 0 3 6 9
  EXPECT_EQ(Values<float>(ops::mul(stepped, stepped)), (std::vector<float>{0, 9, 36, 81}));
}

// CpuKernel's fast paths (all contiguous, a broadcast scalar either side) and its strided loop,
// on outputs written plainly and on outputs large enough to be streamed out in blocks (Note
// [Streaming stores]: one loop computes both, with a last partial block).
TEST(Kernels, CpuKernelRunsPlainAndStreamed) {
  const float three = 3.0f;
  for (int64_t n : {int64_t(1000), kStreamingBytes / int64_t(sizeof(float)) + 37}) {
    Tensor a = Arange(n), b = ops::mul(Arange(n), Scalar(0.25));
    auto f = [](float x, float y) { return x * 3.0f + y; };
    Tensor out = ops::empty(Shape({n}), ScalarType::Float32);
    CpuKernel<float, float, float>(ElementwiseIter({out, a, b}), f);
    Tensor scalar_b = ops::empty(Shape({n}), ScalarType::Float32);
    CpuKernel<float, float, float>(ElementwiseIter({scalar_b, a, Operand::Broadcast(&three)}), f);
    Tensor scalar_a = ops::empty(Shape({n}), ScalarType::Float32);
    CpuKernel<float, float, float>(ElementwiseIter({scalar_a, Operand::Broadcast(&three), b}), f);
    Tensor b_stepped = ops::slice(ops::mul(Arange(2 * n), Scalar(0.125)), 0, 0, 2 * n, 2);  // the strided loop
    Tensor strided = ops::empty(Shape({n}), ScalarType::Float32);
    CpuKernel<float, float, float>(ElementwiseIter({strided, a, b_stepped}), f);
    const float *o = out.data_ptr<float>(), *sb = scalar_b.data_ptr<float>(), *sa = scalar_a.data_ptr<float>(),
                *st = strided.data_ptr<float>();
    int64_t wrong = 0;
    for (int64_t j = 0; j < n; ++j) {
      const float x = float(j), y = float(j) * 0.25f;
      wrong += o[j] != f(x, y) || sb[j] != f(x, three) || sa[j] != f(three, y) || st[j] != f(x, y);
    }
    EXPECT_EQ(wrong, 0) << "n = " << n;
  }
}

TEST(Kernels, SumOverAnyDims) {
  Tensor x = ops::view(Arange(24), Shape({2, 3, 4}));
  EXPECT_EQ(Values<float>(ops::sum(x, std::vector<int64_t>{1})),
            (std::vector<float>{12, 15, 18, 21, 48, 51, 54, 57}));
  EXPECT_EQ(Values<float>(ops::sum(x, std::vector<int64_t>{0, 2})), (std::vector<float>{60, 92, 124}));
  Tensor xt = ops::permute(x, {2, 0, 1});
  EXPECT_EQ(Values<float>(ops::sum(xt, std::vector<int64_t>{0})), Values<float>(ops::sum(x, std::vector<int64_t>{2})));
  EXPECT_EQ(ops::sum(x, std::nullopt).numel(), 1);
  EXPECT_EQ(Values<float>(ops::sum(x, std::nullopt))[0], 276.0f);
}

TEST(Kernels, DtypeConversionsRoundTrip) {
  Tensor x = ops::div(Arange(5), Scalar(int64_t(2)));  // 0 .5 1 1.5 2
  EXPECT_EQ(Values<int64_t>(ops::to_dtype(x, ScalarType::Int64)), (std::vector<int64_t>{0, 0, 1, 1, 2}));
  Tensor h = ops::to_dtype(x, ScalarType::Float16);
  Tensor back = ops::to_dtype(h, ScalarType::Float32);
  EXPECT_EQ(Values<float>(back), Values<float>(x));
  Tensor b = ops::to_dtype(ops::to_dtype(x, ScalarType::BFloat16), ScalarType::Float32);
  EXPECT_EQ(Values<float>(b), Values<float>(x));
  EXPECT_EQ(Values<bool>(ops::to_dtype(x, ScalarType::Bool)), (std::vector<bool>{false, true, true, true, true}));
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(Half(1.0f).x, 0x3c00);
  EXPECT_EQ(Half(65504.0f).x, 0x7bff);
  EXPECT_EQ(Half(1e6f).x, 0x7c00);
  EXPECT_EQ(static_cast<float>(Half(5.9604645e-08f)), 5.9604645e-08f);  // smallest subnormal
  EXPECT_TRUE(std::isnan(static_cast<float>(Half(NAN))));
  EXPECT_EQ(static_cast<float>(BFloat16(1.00390625f)), 1.0f);  // ties to even
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {
TEST(VecMath, ExpFMatchesLibm) {
  float worst = 0;
  for (float x = -104.0f; x < 89.0f; x += 0.0137f) {
    float want = std::exp(x), got = ExpF(x);
    if (want == 0 || std::isinf(want)) { EXPECT_EQ(got, want) << x; continue; }
    if (std::fpclassify(want) == FP_SUBNORMAL) { EXPECT_NEAR(got, want, 2e-45f) << x; continue; }
    worst = std::max(worst, std::abs(got - want) / want);
  }
  EXPECT_LT(worst, 3e-7f);
  EXPECT_TRUE(std::isnan(ExpF(NAN)));
  EXPECT_EQ(ExpF(-INFINITY), 0.0f);
  EXPECT_EQ(ExpF(INFINITY), INFINITY);
}
}  // namespace
}  // namespace kiln
