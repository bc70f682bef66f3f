// runtime/cuda/device_errors_test.cc: Note [Device-side errors] against the fake driver: a report
// (written here as a kernel would) is raised once, by the next synchronisation, with its number in
// the message and the exception class its kind names; messages are interned.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "runtime/cuda/device_errors.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/stream.h"
#include "runtime/error.h"

namespace kiln::cuda {
namespace {

class DeviceErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    // the fake libcuda.so.1 (runtime/cuda/testing/), a data dependency, relative to the runfiles root
    setenv("KILN_CUDA_LIB_DIR", "runtime/cuda/testing", 1);
    ASSERT_TRUE(Available()) << UnavailableReason();
  }
  // What ReportDeviceError (tensor/cuda/kernels/common.cuh) does on the device: claim the word (device
  // memory, which the host reaches only through the driver), then write the number and the code
  // into the mapped host report whose address the word holds.
  static void Report(int32_t* word, int32_t code, int64_t number) {
    ASSERT_EQ(Code(word), 0) << "unclaimed";
    int32_t claim[4];
    ASSERT_EQ(Api().cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(claim), reinterpret_cast<CUdeviceptr>(word),
                                  sizeof claim, nullptr), 0);
    claim[0] = code;
    ASSERT_EQ(Api().cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(word), reinterpret_cast<CUdeviceptr>(claim),
                                  sizeof claim, nullptr), 0);
    int32_t* report;
    std::memcpy(&report, claim + 2, sizeof report);
    std::memcpy(report + 2, &number, sizeof number);
    report[0] = code;
  }
  // The claim in the device word.
  static int32_t Code(int32_t* word) {
    int32_t code = -1;
    EXPECT_EQ(Api().cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(&code), reinterpret_cast<CUdeviceptr>(word),
                                  sizeof code, nullptr), 0);
    return code;
  }
};

TEST_F(DeviceErrors, AReportIsRaisedOnceWithItsNumber) {
  int32_t* word = DeviceErrorWord(0);
  ASSERT_NE(word, nullptr);
  EXPECT_EQ(word, DeviceErrorWord(0)) << "one word per device";
  EXPECT_EQ(Code(word), 0);
  ThrowReportedDeviceError(0);  // nothing reported: no throw
  Report(word, DeviceErrorCode(KILN_DEVICE_ERROR_INDEX, "Target {} is out of bounds."), -7);
  try {
    ThrowReportedDeviceError(0);
    FAIL() << "expected an IndexError";
  } catch (const IndexError& e) {
    EXPECT_STREQ(e.what(), "Target -7 is out of bounds.");
  }
  EXPECT_EQ(Code(word), 0) << "cleared";
  ThrowReportedDeviceError(0);
}

TEST_F(DeviceErrors, SynchronisingRaisesAndTheKindPicksTheClass) {
  int32_t* word = DeviceErrorWord(0);
  Report(word, DeviceErrorCode(KILN_DEVICE_ERROR_RUNTIME, "bad thing"), 0);
  EXPECT_THROW(CurrentStream(0).Synchronize(), Error);
  Report(word, DeviceErrorCode(KILN_DEVICE_ERROR_INDEX, "index out of range in self"), 3);
  EXPECT_THROW(SynchronizeDevice(0), IndexError);
  CurrentStream(0).Synchronize();
}

TEST_F(DeviceErrors, MessagesAreInterned) {
  const int32_t a = DeviceErrorCode(KILN_DEVICE_ERROR_INDEX, "interned {}");
  EXPECT_EQ(a, DeviceErrorCode(KILN_DEVICE_ERROR_INDEX, "interned {}"));
  EXPECT_NE(a, DeviceErrorCode(KILN_DEVICE_ERROR_RUNTIME, "interned {}"));
  EXPECT_NE(a, DeviceErrorCode(KILN_DEVICE_ERROR_INDEX, "another"));
  EXPECT_EQ(a & 0xF, KILN_DEVICE_ERROR_INDEX);
}

}  // namespace
}  // namespace kiln::cuda
