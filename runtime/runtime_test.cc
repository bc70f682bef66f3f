// runtime/runtime_test.cc: devices parse and print; the pool covers a range exactly once.
#include <atomic>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"

namespace kiln {

TEST(Device, ParsesAndPrints) {
  EXPECT_EQ(Device::Parse("cpu").str(), "cpu");
  EXPECT_EQ(Device::Parse("cuda:1").str(), "cuda:1");
  EXPECT_TRUE(Device::Parse("meta").is_meta());
  EXPECT_THROW(Device::Parse("tpu"), Error);
  EXPECT_THROW(Device::Parse("cuda:x"), Error);
}

TEST(Allocator, AlignedAndReused) {
  Allocator* a = GetCPUAllocator();
  void* first;
  {
    DataPtr p = a->Allocate(4 << 20);
    first = p.get();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 64, 0u);
  }
  DataPtr q = a->Allocate(4 << 20);
  EXPECT_EQ(q.get(), first);  // the block cache hands the same block back
}

TEST(ThreadPool, CoversRangeOnce) {
  std::vector<std::atomic<int>> hits(10007);
  ParallelFor(0, 10007, 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) hits[i]++;
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
}

TEST(ThreadPool, PropagatesExceptions) {
  EXPECT_THROW(ParallelFor(0, 1 << 20, 1, [](int64_t, int64_t) { throw ValueError("boom"); }),
               ValueError);
  int calls = 0;
  ParallelFor(0, 4, 1000, [&](int64_t b, int64_t e) { calls++; });
  EXPECT_EQ(calls, 1);  // below the grain: runs inline
}

}  // namespace kiln
