// runtime/runtime_test.cc: devices parse and print, the allocator, the pool (each index once), FunctionRef.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "runtime/function_ref.h"
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

// A function compiled once that calls back (as ElementwiseIter::Run does).
static int SumOver(int n, FunctionRef<int(int)> f) {
  int total = 0;
  for (int i = 0; i < n; ++i) total += f(i);
  return total;
}

TEST(FunctionRef, CallsTheReferencedCallable) {
  int offset = 10;
  EXPECT_EQ(SumOver(4, [&](int i) { return i + offset; }), 0 + 1 + 2 + 3 + 40);
  struct Squares {  // a stateful callable is referenced, not copied (std::function would copy it)
    int calls = 0;
    int operator()(int i) { ++calls; return i * i; }
  } squares;
  EXPECT_EQ(SumOver(3, squares), 0 + 1 + 4);
  EXPECT_EQ(squares.calls, 3);
  std::function<int(int)> boxed = [](int i) { return -i; };
  EXPECT_EQ(SumOver(3, boxed), -3);
  // Arguments are forwarded, results returned: a move-only argument and a reference result.
  std::string text = "kiln";
  auto append = [&](std::unique_ptr<int> p) -> std::string& {
    text += std::to_string(*p);
    return text;
  };
  // bound to a named callable: bound to the lambda itself, the reference outlived that temporary
  // (ASan: stack-use-after-scope)
  FunctionRef<std::string&(std::unique_ptr<int>)> pick = append;
  EXPECT_EQ(&pick(std::make_unique<int>(2)), &text);
  EXPECT_EQ(text, "kiln2");
  // Exceptions pass through.
  EXPECT_THROW(SumOver(1, [](int) -> int { throw ValueError("boom"); }), ValueError);
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

// Note [Claimed chunks]: many regions back to back on more threads than cores, each index once;
// chunk boundaries are the same whichever thread runs a chunk.
TEST(ThreadPool, ManyRegionsEachIndexOnce) {
  SetNumThreads(4);
  for (int region = 0; region < 300; ++region) {
    const int64_t n = 1 + region * 7;
    std::vector<std::atomic<int>> hits(n);
    std::mutex mu;
    std::set<std::pair<int64_t, int64_t>> ranges;
    ParallelFor(0, n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
      std::lock_guard<std::mutex> lock(mu);
      ranges.insert({b, e});
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "region " << region;
    const int64_t chunks = std::min<int64_t>(GetNumThreads(), n), per = (n + chunks - 1) / chunks;
    for (const auto& [b, e] : ranges) ASSERT_EQ(b % per, 0) << "region " << region;
  }
  SetNumThreads(2);
}

// A worker that has not woken yet holds up no chunk: the caller claims it (chunk i was worker i's
// before, and the caller waited for it).
TEST(ThreadPool, CallerClaimsChunksOfSleepingWorkers) {
  SetNumThreads(2);
  const std::thread::id caller = std::this_thread::get_id();
  int regions_all_on_caller = 0;
  for (int region = 0; region < 40; ++region) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // past the workers' spin: asleep
    std::atomic<int> on_caller{0};
    ParallelFor(0, 2, 1, [&](int64_t, int64_t) {
      if (std::this_thread::get_id() == caller) on_caller++;
    });
    regions_all_on_caller += on_caller.load() == 2;
  }
  EXPECT_GT(regions_all_on_caller, 0);
}

}  // namespace kiln
