// init/dispatch_layers_test.cc: after InstallDispatchLayers every layer is in the registry, and an
// op dispatches through them (an add records its gradient; the Fake and Meta keys have kernels).
#include <gtest/gtest.h>

#include "init/dispatch_layers.h"
#include "tensor/dispatcher.h"

namespace kiln {
namespace {

TEST(InstallDispatchLayers, InstallsEveryLayerOnce) {
  InstallDispatchLayers();
  InstallDispatchLayers();  // idempotent
  const Registry& r = Registry::Get();
  const Op& add = r.FindOrThrow("aten::add.Tensor");
  EXPECT_TRUE(add.HasKernel(DispatchKey::CPU));
  EXPECT_TRUE(add.HasKernel(DispatchKey::Autograd) || r.fallback(DispatchKey::Autograd)) << "autograd";
  EXPECT_TRUE(add.HasKernel(DispatchKey::Functionalize) || r.fallback(DispatchKey::Functionalize))
      << "functionalize";
  EXPECT_TRUE(static_cast<bool>(r.fallback(DispatchKey::Tracing))) << "make_fx's tracing";
  EXPECT_TRUE(add.HasKernel(DispatchKey::Fake) || r.fallback(DispatchKey::Fake)) << "fake tensors";
  EXPECT_TRUE(add.HasKernel(DispatchKey::Meta) || r.fallback(DispatchKey::Meta)) << "meta";
  // the dynamic-shape kernels register an op of their own
  EXPECT_NE(r.Find("aten::_local_scalar_dense"), nullptr);
}

}  // namespace
}  // namespace kiln
