// tensor/fake_tensor_test.cc: the Fake dispatch key's contract: fake outputs of the mode with the
// real kernels' layout, aliasing through data-less storages, factories under an active mode, the
// errors for real/mixed inputs and for ops without a meta function, and the cross-reference check.
#include "tensor/fake_tensor.h"

#include "tensor/testing/op_test_util.h"

namespace kiln {
namespace {

using namespace optest;  // NOLINT

Tensor Fake(const FakeTensorModePtr& mode, DimVector sizes, DimVector strides = {}, int64_t offset = 0,
            ScalarType dtype = ScalarType::Float32) {
  return mode->Empty(SymDimVector(sizes.begin(), sizes.end()), SymDimVector(strides.begin(), strides.end()), offset,
                     dtype, Device());
}

TEST(FakeTensor, IsFakeHasModeDeviceAndNoData) {
  auto mode = std::make_shared<FakeTensorMode>();
  Tensor t = Fake(mode, {2, 3});
  EXPECT_TRUE(IsFake(t));
  EXPECT_EQ(FakeModeOf(t), mode.get());
  EXPECT_TRUE(t.device().is_cpu());
  EXPECT_FALSE(t->has_storage());
  EXPECT_EQ(t.raw_data(), nullptr);
  ASSERT_NE(t->storage(), nullptr);
  EXPECT_TRUE(t->storage()->data_less());
  EXPECT_EQ(t->storage()->nbytes(), 24u);
  EXPECT_FALSE(IsFake(F({1, 2})));
  EXPECT_EQ(FakeModeOf(F({1, 2})), nullptr);
}

TEST(FakeTensor, OpsGiveFakesWithTheRealLayout) {
  auto mode = std::make_shared<FakeTensorMode>();
  Tensor real = ops::transpose(ops::view(Arange(12), SL{3, 4}), 0, 1);  // (4, 3), strides (1, 4)
  Tensor fake = mode->FromReal(real);
  EXPECT_EQ(fake.sizes(), real.sizes());
  EXPECT_EQ(fake.strides(), real.strides());
  for (const auto& [r, f] : {std::pair{Call("aten::exp", real), Call("aten::exp", fake)},
                             std::pair{Call("aten::mm", real, ops::transpose(real, 0, 1)),
                                       Call("aten::mm", fake, ops::transpose(fake, 0, 1))},
                             std::pair{Call("aten::sum.dim_IntList", real, std::optional<SL>(SL{0}),
                                            true, OptDtype()),
                                       Call("aten::sum.dim_IntList", fake, std::optional<SL>(SL{0}),
                                            true, OptDtype())}}) {
    EXPECT_TRUE(IsFake(f));
    EXPECT_EQ(FakeModeOf(f), mode.get());
    EXPECT_EQ(f.sizes(), r.sizes());
    EXPECT_EQ(f.strides(), r.strides());
    EXPECT_EQ(f.dtype(), r.dtype());
  }
}

TEST(FakeTensor, ViewsAndInPlaceOpsAlias) {
  auto mode = std::make_shared<FakeTensorMode>();
  Tensor x = Fake(mode, {4, 6});
  Tensor v = ops::transpose(x, 0, 1);
  EXPECT_EQ(v->storage(), x->storage());
  EXPECT_EQ(v->version_counter(), x->version_counter());
  EXPECT_TRUE(IsFake(v));
  Tensor y = Call("aten::add_.Scalar", x, Scalar(1.0), Scalar(int64_t(1)));
  EXPECT_TRUE(y.is_same(x));
  EXPECT_EQ(x->version(), 1u);
  Tensor c = ops::clone(x);
  EXPECT_NE(c->storage(), x->storage());
}

TEST(FakeTensor, FromRealIsMemoisedAndSharesStorages) {
  auto mode = std::make_shared<FakeTensorMode>();
  Tensor base = Arange(12);
  Tensor view = ops::slice(base, 0, 2, 10, 2);
  Tensor fb = mode->FromReal(base), fv = mode->FromReal(view);
  EXPECT_TRUE(mode->FromReal(base).is_same(fb));
  EXPECT_EQ(fb->storage(), fv->storage());
  EXPECT_EQ(fv.sizes(), view.sizes());
  EXPECT_EQ(fv.strides(), view.strides());
  EXPECT_EQ(fv->storage_offset(), 2);
}

TEST(FakeTensor, FactoriesUnderAnActiveModeAreFake) {
  auto mode = std::make_shared<FakeTensorMode>();
  {
    FakeModeGuard guard(mode);
    Tensor z = Call("aten::zeros", SL{2, 5}, OptDtype(), OptLayout(), OptDevice(), OptBool());
    EXPECT_TRUE(IsFake(z));
    EXPECT_EQ(FakeModeOf(z), mode.get());
    Tensor m = Call("aten::zeros", SL{2}, OptDtype(), OptLayout(), OptDevice(Device(DeviceType::Meta)), OptBool());
    EXPECT_TRUE(IsFake(m));
    EXPECT_TRUE(m.device().is_meta());
    {
      FakeModeGuard unset(nullptr);
      EXPECT_FALSE(IsFake(Call("aten::zeros", SL{2}, OptDtype(), OptLayout(), OptDevice(), OptBool())));
    }
  }
  EXPECT_FALSE(IsFake(Call("aten::zeros", SL{2}, OptDtype(), OptLayout(), OptDevice(), OptBool())));
  EXPECT_EQ(ActiveFakeMode(), nullptr);
}

TEST(FakeTensor, RealAndMixedInputsRaise) {
  auto mode = std::make_shared<FakeTensorMode>();
  auto other = std::make_shared<FakeTensorMode>();
  Tensor f = Fake(mode, {2, 2});
  ExpectError<FakeAssertionError>([&] { ops::add(f, F({1, 2, 3, 4}, {2, 2})); },
                                  "Please convert all Tensors to FakeTensors first or instantiate FakeTensorMode "
                                  "with 'allow_non_fake_inputs'. Found in aten.add.Tensor(FakeTensor(..., size=(2, 2))");
  ExpectError<FakeAssertionError>([&] { ops::add(f, Fake(other, {2, 2})); }, "Mixing fake modes NYI");
  mode->set_allow_non_fake_inputs(true);
  Tensor r = ops::add(f, F({1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(FakeModeOf(r), mode.get());
}

Tensor NoMetaCPU(const Tensor& self) { return self; }

TEST(FakeTensor, OpWithoutMetaFunctionRaisesNamingIt) {
  Registry::Get().Def("_fake_test_no_meta(Tensor self) -> Tensor").Impl<&NoMetaCPU>(DispatchKey::CPU);
  auto mode = std::make_shared<FakeTensorMode>();
  ExpectError<NotImplementedError>([&] { Call("aten::_fake_test_no_meta", Fake(mode, {2})); },
                                   "Could not run 'aten::_fake_test_no_meta' with fake or meta tensors");
}

TEST(FakeTensor, OutOverloadsWithoutMetaRunTheirFunctionalSibling) {
  auto mode = std::make_shared<FakeTensorMode>();
  Tensor out = Fake(mode, {0});
  Tensor r = Call("aten::add.out", Fake(mode, {3, 4}), Fake(mode, {4}), Scalar(int64_t(1)), out);
  EXPECT_TRUE(r.is_same(out));
  EXPECT_EQ(out.sizes(), Shape({3, 4}));
  Tensor meta_out = EmptyTensor(DimVector{0}, ScalarType::Float32, Device(DeviceType::Meta));
  Tensor a = EmptyTensor(DimVector{2, 3}, ScalarType::Float32, Device(DeviceType::Meta));
  Call("aten::mul.out", a, a, meta_out);
  EXPECT_EQ(meta_out.sizes(), Shape({2, 3}));
}

TEST(FakeTensor, CrossRefComparesEveryOp) {
  auto mode = std::make_shared<FakeTensorMode>(/*allow_non_fake_inputs=*/true);
  mode->crossref = true;
  {
    FakeModeGuard guard(mode);
    Tensor x = ops::transpose(ops::view(Arange(12), SL{3, 4}), 0, 1);
    Tensor y = Call("aten::exp", x);
    EXPECT_FALSE(IsFake(y));  // real results; the fakes were only compared
    ops::clone(x);
  }
  EXPECT_TRUE(mode->crossref_mismatches.empty()) << mode->crossref_mismatches[0];
  EXPECT_TRUE(mode->crossref_seen.count("aten::exp"));
  EXPECT_TRUE(mode->crossref_seen.count("aten::copy_"));  // inside clone's composite kernel
}

}  // namespace
}  // namespace kiln
