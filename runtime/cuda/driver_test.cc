// runtime/cuda/driver_test.cc: the loader's search order, and a machine without a usable driver
// answering "unavailable" quietly with a reason (CI has no GPU; the H200 runs tools/gpu/test.sh).
#include <gtest/gtest.h>

#include <cstdlib>

#include "runtime/cuda/driver.h"
#include "runtime/cuda/loader.h"
#include "runtime/error.h"

namespace kiln::cuda {
namespace {

TEST(Loader, SearchOrderForLibrariesIsOverrideAddedToolkitSoname) {
  setenv("KILN_CUDA_LIB_DIR", "/opt/override", 1);
  AddLibrarySearchDir("/venv/site-packages/nvidia/cu13/lib");
  AddLibrarySearchDir("/venv/site-packages/nvidia/cu13/lib");  // added once
  std::vector<std::string> paths = CandidatePaths("libcublas.so.13");
  unsetenv("KILN_CUDA_LIB_DIR");
  ASSERT_GE(paths.size(), 4u);
  EXPECT_EQ(paths[0], "/opt/override/libcublas.so.13");
  EXPECT_EQ(paths[1], "/venv/site-packages/nvidia/cu13/lib/libcublas.so.13");
  EXPECT_EQ(paths[2], "/usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13");
  EXPECT_EQ(paths.back(), "libcublas.so.13");
  int venv_hits = 0;
  for (const auto& p : paths) venv_hits += p.rfind("/venv/", 0) == 0;
  EXPECT_EQ(venv_hits, 1);
}

TEST(Loader, DriverIsSearchedOnlyWhereTheMachineKeepsIt) {
  std::vector<std::string> paths = CandidatePaths("libcuda.so.1");
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths[0], "libcuda.so.1");  // the dynamic loader's own search first
  for (const auto& p : paths) {
    EXPECT_EQ(p.find("/venv/"), std::string::npos) << p;
    EXPECT_EQ(p.find("stubs"), std::string::npos) << p;
  }
}

TEST(Loader, MissingLibraryReportsEveryAttemptWithoutThrowing) {
  Library lib = OpenLibrary("libkiln_does_not_exist.so.7");
  EXPECT_EQ(lib.handle, nullptr);
  EXPECT_NE(lib.error.find("libkiln_does_not_exist.so.7"), std::string::npos) << lib.error;
}

TEST(Loader, ResolveSymbolNamesTheFirstMissingEntryPoint) {
  Library lib = OpenLibrary("libm.so.6");
  ASSERT_NE(lib.handle, nullptr) << lib.error;
  std::string reason;
  double (*cos_fn)(double) = nullptr;
  void (*missing)() = nullptr;
  void (*also_missing)() = nullptr;
  ResolveSymbol(lib, cos_fn, "cos", &reason);
  ASSERT_NE(cos_fn, nullptr);
  EXPECT_EQ(cos_fn(0.0), 1.0);
  EXPECT_TRUE(reason.empty());
  ResolveSymbol(lib, missing, "kiln_no_such_symbol", &reason);
  ResolveSymbol(lib, also_missing, "kiln_no_such_symbol_either", &reason);
  EXPECT_EQ(missing, nullptr);
  EXPECT_EQ(reason, lib.path + " lacks kiln_no_such_symbol");
}

// On a machine with no driver (CI): unavailable, with a reason, and every entry point throws a
// typed error rather than crashing. Where a GPU exists the same calls must succeed.
TEST(Driver, AvailabilityIsConsistent) {
  if (!Available()) {
    EXPECT_EQ(DeviceCount(), 0);
    EXPECT_FALSE(UnavailableReason().empty());
    EXPECT_THROW(Api(), Error);
    EXPECT_THROW(EnsureContext(0), Error);
    EXPECT_THROW(GetDeviceProperties(0), Error);
  } else {
    EXPECT_GT(DeviceCount(), 0);
    EXPECT_GT(DriverVersion(), 0);
    const DeviceProperties& p = GetDeviceProperties(0);
    EXPECT_FALSE(p.name.empty());
    EXPECT_GT(p.major, 0);
    EXPECT_THROW(EnsureContext(DeviceCount()), NamedError);
  }
}

}  // namespace
}  // namespace kiln::cuda
