// runtime/cuda/caching_allocator_test.cc: the caching allocator's bookkeeping against a fake
// driver: rounding and pools, reuse, split/merge, per-stream lists, record_stream, OOM, stats.
//
// FakeDevice hands out addresses from a pretend address space (never dereferenced) with a fixed
// capacity, records every call, and completes events only when the test says so.
#include "runtime/cuda/caching_allocator.h"

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/error.h"

namespace kiln::cuda {
namespace {

constexpr size_t KiB = size_t(1) << 10;
constexpr size_t MiB = size_t(1) << 20;
constexpr size_t GiB = size_t(1) << 30;
constexpr StreamHandle kStreamA = 0x100;
constexpr StreamHandle kStreamB = 0x200;
constexpr StreamHandle kStreamC = 0x300;

class FakeDevice final : public DeviceMemoryOps {
 public:
  explicit FakeDevice(size_t capacity) : capacity_(capacity) {}

  bool Malloc(void** ptr, size_t bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    malloc_sizes.push_back(bytes);
    if (bytes > capacity_ - used_) return false;
    *ptr = reinterpret_cast<void*>(next_address_);
    next_address_ += bytes;  // addresses are never reused, so a stale pointer cannot alias
    used_ += bytes;
    live_[*ptr] = bytes;
    return true;
  }
  void Free(void* ptr) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    ASSERT_NE(it, live_.end()) << "the allocator freed " << ptr << ", which the driver never gave";
    used_ -= it->second;
    live_.erase(it);
    freed.push_back(ptr);
  }
  void MemGetInfo(size_t* free_bytes, size_t* total_bytes) override {
    std::lock_guard<std::mutex> lock(mu_);
    *free_bytes = capacity_ - used_;
    *total_bytes = capacity_;
  }
  EventHandle CreateEvent() override {
    std::lock_guard<std::mutex> lock(mu_);
    EventHandle event = next_event_++;
    events_[event] = Event{};
    return event;
  }
  void DestroyEvent(EventHandle event) override {
    std::lock_guard<std::mutex> lock(mu_);
    EXPECT_EQ(events_.erase(event), 1u) << "destroyed an unknown event " << event;
  }
  void RecordEvent(EventHandle event, StreamHandle stream) override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.at(event) = Event{stream, /*done=*/false};
  }
  bool QueryEvent(EventHandle event) override {
    std::lock_guard<std::mutex> lock(mu_);
    return complete_on_query || events_.at(event).done;
  }
  void SynchronizeEvent(EventHandle event) override {
    std::lock_guard<std::mutex> lock(mu_);
    events_.at(event).done = true;
  }
  void SynchronizeDevice() override {
    std::lock_guard<std::mutex> lock(mu_);
    device_syncs += 1;
    for (auto& [handle, event] : events_) event.done = true;
  }

  // The work queued on `stream` so far has finished.
  void FinishStream(StreamHandle stream) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [handle, event] : events_) {
      if (event.stream == stream) event.done = true;
    }
  }
  size_t live_events() const { return events_.size(); }
  size_t live_segments() const { return live_.size(); }
  size_t used() const { return used_; }

  std::vector<size_t> malloc_sizes;  // every Malloc call, failed ones included
  std::vector<void*> freed;          // every Free call
  int device_syncs = 0;
  bool complete_on_query = false;  // for the stress test: no one is there to finish streams

 private:
  struct Event {
    StreamHandle stream = 0;
    bool done = false;
  };
  std::mutex mu_;
  const size_t capacity_;
  size_t used_ = 0;
  uintptr_t next_address_ = 0x7f0000000000;  // 2 MiB aligned, like cudaMalloc's results
  std::map<void*, size_t> live_;
  std::map<EventHandle, Event> events_;
  EventHandle next_event_ = 1;
};

char* At(void* base, size_t offset) { return static_cast<char*>(base) + offset; }

TEST(CachingAllocator, RoundsAndPicksPool) {
  FakeDevice device(64 * GiB);
  CachingAllocator alloc(&device, 0);
  EXPECT_EQ(alloc.Allocate(0, kStreamA), nullptr);
  alloc.Free(nullptr);
  // One stream each, so every request needs its own segment and the fake sees its size.
  struct Case {
    size_t request, block, segment;
    bool large;
  };
  const Case cases[] = {
      {1, 512, 2 * MiB, false},                  // at least kMinBlockSize
      {1 * MiB, 1 * MiB, 2 * MiB, false},        // the largest small request
      {1 * MiB + 1, 1 * MiB + 512, 20 * MiB, true},
      {5 * MiB + 1, 5 * MiB + 512, 20 * MiB, true},
      {10 * MiB - 1, 10 * MiB, 10 * MiB, true},  // 10 MiB is no longer "< 10 MiB": own segment
      {10 * MiB + 1, 10 * MiB + 512, 12 * MiB, true},
      {11 * MiB, 12 * MiB, 12 * MiB, true},      // 1 MiB remainder is not split off
  };
  std::vector<size_t> expected_mallocs;
  int64_t expected_allocated = 0;
  StreamHandle stream = 1;
  for (const Case& c : cases) {
    EXPECT_NE(alloc.Allocate(c.request, stream++), nullptr);
    expected_mallocs.push_back(c.segment);
    expected_allocated += c.block;
  }
  EXPECT_EQ(device.malloc_sizes, expected_mallocs);
  EXPECT_EQ(expected_allocated, 40896512);
  EXPECT_EQ(alloc.stats().allocated_bytes, expected_allocated);
  auto snapshot = alloc.Snapshot();
  ASSERT_EQ(snapshot.size(), std::size(cases));
  for (size_t i = 0; i < snapshot.size(); ++i) {
    EXPECT_EQ(snapshot[i].is_large, cases[i].large) << i;
    EXPECT_EQ(snapshot[i].total_size, cases[i].segment) << i;
    EXPECT_EQ(snapshot[i].allocated_size, cases[i].block) << i;
    EXPECT_EQ(snapshot[i].stream, StreamHandle(i + 1)) << i;
  }
}

TEST(CachingAllocator, ReusesWithoutMalloc) {
  FakeDevice device(1 * GiB);
  CachingAllocator alloc(&device, 0);
  void* p = alloc.Allocate(4 * MiB, kStreamA);
  alloc.Free(p);
  EXPECT_EQ(alloc.Allocate(4 * MiB, kStreamA), p);
  EXPECT_EQ(alloc.Allocate(3 * MiB, kStreamA), At(p, 4 * MiB));  // from the split remainder
  void* s = alloc.Allocate(100, kStreamA);
  alloc.Free(s);
  EXPECT_EQ(alloc.Allocate(200, kStreamA), s);
  EXPECT_EQ(device.malloc_sizes, (std::vector<size_t>{20 * MiB, 2 * MiB}));
  EXPECT_EQ(alloc.stats().num_segments, 2);
}

TEST(CachingAllocator, SplitsAndMerges) {
  FakeDevice device(1 * GiB);
  CachingAllocator alloc(&device, 0);
  void* a = alloc.Allocate(1000, kStreamA);
  void* b = alloc.Allocate(1000, kStreamA);
  void* c = alloc.Allocate(1000, kStreamA);
  EXPECT_EQ(b, At(a, 1024));
  EXPECT_EQ(c, At(a, 2048));
  using B = CachingAllocator::BlockInfo;
  auto blocks = [&] {
    auto snapshot = alloc.Snapshot();
    EXPECT_EQ(snapshot.size(), 1u);
    return snapshot.at(0).blocks;
  };
  const size_t tail = 2 * MiB - 3 * KiB;
  EXPECT_EQ(blocks(), (std::vector<B>{{a, 1024, true, false}, {b, 1024, true, false},
                                      {c, 1024, true, false}, {At(a, 3 * KiB), tail, false, false}}));
  EXPECT_EQ(alloc.stats().inactive_split_bytes, int64_t(tail));

  alloc.Free(b);  // between two allocated blocks: nothing to merge with
  EXPECT_EQ(blocks(), (std::vector<B>{{a, 1024, true, false}, {b, 1024, false, false},
                                      {c, 1024, true, false}, {At(a, 3 * KiB), tail, false, false}}));
  EXPECT_EQ(alloc.stats().inactive_split_bytes, int64_t(tail + 1024));

  alloc.Free(c);  // merges with b before it and the tail after it
  EXPECT_EQ(blocks(), (std::vector<B>{{a, 1024, true, false}, {b, 2 * MiB - 1024, false, false}}));
  EXPECT_EQ(alloc.stats().inactive_split_bytes, int64_t(2 * MiB - 1024));
  EXPECT_EQ(alloc.Snapshot()[0].allocated_size, 1024u);

  alloc.Free(a);  // the segment is whole again, so no longer "split"
  EXPECT_EQ(blocks(), (std::vector<B>{{a, 2 * MiB, false, false}}));
  EXPECT_EQ(alloc.stats().inactive_split_bytes, 0);
  EXPECT_EQ(device.malloc_sizes.size(), 1u);

  // The small pool splits off even a 512 B remainder, and a later 1-byte request fits in it.
  void* x = alloc.Allocate(1 * MiB, kStreamB);
  alloc.Allocate(1 * MiB - 512, kStreamB);
  EXPECT_EQ(alloc.Allocate(1, kStreamB), At(x, 2 * MiB - 512));
  EXPECT_EQ(device.malloc_sizes.size(), 2u);
}

TEST(CachingAllocator, FreeListsArePerStream) {
  FakeDevice device(1 * GiB);
  CachingAllocator alloc(&device, 0);
  void* a = alloc.Allocate(1000, kStreamA);
  alloc.Free(a);
  void* b = alloc.Allocate(1000, kStreamB);  // a's segment is free, but belongs to stream A
  EXPECT_NE(b, a);
  EXPECT_EQ(device.malloc_sizes.size(), 2u);
  auto snapshot = alloc.Snapshot();
  ASSERT_EQ(snapshot.size(), 2u);
  EXPECT_EQ(snapshot[0].stream, kStreamA);
  EXPECT_EQ(snapshot[1].stream, kStreamB);
  EXPECT_EQ(alloc.Allocate(1000, kStreamA), a);
  EXPECT_EQ(device.malloc_sizes.size(), 2u);
}

TEST(CachingAllocator, RecordStreamDefersReuse) {
  FakeDevice device(1 * GiB);
  CachingAllocator alloc(&device, 0);
  void* p = alloc.Allocate(1000, kStreamA);
  alloc.RecordStream(p, kStreamA);  // its own stream: needs no event
  alloc.RecordStream(p, kStreamB);
  alloc.RecordStream(p, kStreamC);
  alloc.RecordStream(p, kStreamB);  // recorded once per stream
  alloc.Free(p);
  EXPECT_EQ(device.live_events(), 2u);
  auto stats = alloc.stats();
  EXPECT_EQ(stats.allocated_bytes, 0);
  EXPECT_EQ(stats.active_bytes, 1024);  // still in use by B and C
  EXPECT_EQ(alloc.Snapshot()[0].blocks[0], (CachingAllocator::BlockInfo{p, 1024, false, true}));

  EXPECT_EQ(alloc.Allocate(1000, kStreamA), At(p, 1024));  // p is not handed out yet
  device.FinishStream(kStreamB);
  EXPECT_EQ(alloc.Allocate(1000, kStreamA), At(p, 2048));  // C has not finished
  EXPECT_EQ(device.live_events(), 1u);
  device.FinishStream(kStreamC);
  EXPECT_EQ(alloc.Allocate(1000, kStreamA), p);
  EXPECT_EQ(device.live_events(), 0u);
  EXPECT_EQ(alloc.stats().active_bytes, 3 * 1024);
  EXPECT_EQ(device.malloc_sizes.size(), 1u);
}

TEST(CachingAllocator, OutOfMemoryRetriesAfterReleasingCache) {
  FakeDevice device(64 * MiB);
  CachingAllocator alloc(&device, 0);
  void* cached = alloc.Allocate(30 * MiB, kStreamA);
  alloc.Free(cached);
  void* waiting = alloc.Allocate(1000, kStreamA);  // its segment frees once B's event is waited on
  alloc.RecordStream(waiting, kStreamB);
  alloc.Free(waiting);
  void* big = alloc.Allocate(40 * MiB, kStreamA);  // 32 MiB free on the device: first try fails
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(device.malloc_sizes, (std::vector<size_t>{30 * MiB, 2 * MiB, 40 * MiB, 40 * MiB}));
  EXPECT_EQ(device.freed.size(), 2u);
  EXPECT_EQ(device.live_events(), 0u);
  auto stats = alloc.stats();
  EXPECT_EQ(stats.num_alloc_retries, 1);
  EXPECT_EQ(stats.num_ooms, 0);
  EXPECT_EQ(stats.reserved_bytes, int64_t(40 * MiB));
  EXPECT_EQ(stats.reserved_bytes_peak, int64_t(40 * MiB));  // 32 MiB before, 40 MiB after
  EXPECT_EQ(stats.num_segments, 1);
  EXPECT_EQ(stats.allocated_bytes, int64_t(40 * MiB));
}

TEST(CachingAllocator, OutOfMemoryThrowsAndChangesNothing) {
  FakeDevice device(80 * GiB);
  CachingAllocator alloc(&device, 1);
  alloc.Allocate(77 * GiB, kStreamA);
  alloc.Allocate(5 * MiB, kStreamA);  // in a 20 MiB segment
  alloc.Allocate(1000, kStreamA);     // in a 2 MiB segment; no segment is wholly free
  const auto stats_before = alloc.stats();
  const auto snapshot_before = alloc.Snapshot();
  const size_t used_before = device.used();
  try {
    alloc.Allocate(4 * GiB, kStreamA);
    FAIL() << "expected an OutOfMemoryError";
  } catch (const NamedError& e) {
    EXPECT_EQ(e.python_module(), "kiln");
    EXPECT_EQ(e.python_class(), "OutOfMemoryError");
    EXPECT_EQ(std::string(e.what()),
              "CUDA out of memory. Tried to allocate 4.00 GiB. GPU 1 has a total capacity of "
              "80.00 GiB of which 2.98 GiB is free. Of the allocated memory 77.00 GiB is allocated "
              "by kiln, and 17.00 MiB is reserved by kiln but unallocated.");
  }
  auto expected = stats_before;
  expected.num_ooms += 1;
  expected.num_alloc_retries += 1;
  EXPECT_EQ(alloc.stats(), expected);
  EXPECT_EQ(alloc.Snapshot(), snapshot_before);
  EXPECT_EQ(device.used(), used_before);
  EXPECT_EQ(device.freed.size(), 0u);
  EXPECT_EQ(device.malloc_sizes, (std::vector<size_t>{77 * GiB, 20 * MiB, 2 * MiB, 4 * GiB, 4 * GiB}));
}

TEST(CachingAllocator, OutOfMemoryMessageFormatsSizesAsPyTorch) {
  auto message = [](size_t first, size_t second) {
    FakeDevice device(4 * MiB);
    CachingAllocator alloc(&device, 0);
    alloc.Allocate(first, kStreamA);
    if (second != 0) alloc.Allocate(second, kStreamA);
    try {
      alloc.Allocate(3 * MiB, kStreamA);
    } catch (const NamedError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(1000, 1 * MiB),
            "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
            "4.00 MiB of which 2.00 MiB is free. Of the allocated memory 1.00 MiB is allocated by "
            "kiln, and 1023.00 KiB is reserved by kiln but unallocated.");
  EXPECT_EQ(message(1000, 0),
            "CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of "
            "4.00 MiB of which 2.00 MiB is free. Of the allocated memory 1024 bytes is allocated by "
            "kiln, and 2.00 MiB is reserved by kiln but unallocated.");
}

TEST(CachingAllocator, EmptyCacheReleasesOnlyWhollyFreeSegments) {
  FakeDevice device(1 * GiB);
  CachingAllocator alloc(&device, 0);
  void* live_small = alloc.Allocate(1000, kStreamA);  // segment 1: in use
  void* freed_large = alloc.Allocate(4 * MiB, kStreamA);
  alloc.Free(freed_large);  // segment 2: wholly free again
  void* recorded = alloc.Allocate(12 * MiB, kStreamB);
  alloc.RecordStream(recorded, kStreamC);
  alloc.Free(recorded);  // segment 3: free once the device is synchronized
  void* d = alloc.Allocate(4 * MiB, kStreamC);
  void* e = alloc.Allocate(4 * MiB, kStreamC);
  alloc.Free(d);  // segment 4: partly free

  alloc.EmptyCache();
  EXPECT_EQ(device.device_syncs, 1);
  EXPECT_EQ(device.freed, (std::vector<void*>{freed_large, recorded}));
  EXPECT_EQ(device.live_events(), 0u);
  auto stats = alloc.stats();
  EXPECT_EQ(stats.reserved_bytes, int64_t(22 * MiB));
  EXPECT_EQ(stats.num_segments, 2);
  EXPECT_EQ(stats.active_bytes, int64_t(1024 + 4 * MiB));
  auto snapshot = alloc.Snapshot();
  ASSERT_EQ(snapshot.size(), 2u);
  EXPECT_EQ(snapshot[0].address, live_small);
  EXPECT_EQ(snapshot[1].address, d);

  alloc.Free(live_small);
  alloc.Free(e);
  alloc.EmptyCache();
  EXPECT_EQ(alloc.stats().reserved_bytes, 0);
  EXPECT_EQ(device.live_segments(), 0u);
}

TEST(CachingAllocator, PeakAndAccumulatedStatsReset) {
  FakeDevice device(1 * GiB);
  CachingAllocator alloc(&device, 0);
  void* p = alloc.Allocate(8 * MiB, kStreamA);
  void* q = alloc.Allocate(4 * MiB, kStreamA);
  CachingAllocator::Stats expected;
  expected.allocated_bytes = expected.allocated_bytes_peak = expected.active_bytes = 12 * MiB;
  expected.reserved_bytes = expected.reserved_bytes_peak = 20 * MiB;
  expected.inactive_split_bytes = 8 * MiB;
  expected.num_allocs = 2;
  expected.num_segments = 1;
  EXPECT_EQ(alloc.stats(), expected);

  alloc.Free(p);  // q sits between p and the tail, so nothing merges
  expected.allocated_bytes = expected.active_bytes = 4 * MiB;
  expected.inactive_split_bytes = 16 * MiB;
  expected.num_frees = 1;
  EXPECT_EQ(alloc.stats(), expected);

  alloc.ResetPeakStats();
  expected.allocated_bytes_peak = 4 * MiB;
  EXPECT_EQ(alloc.stats(), expected);

  alloc.Free(q);
  alloc.EmptyCache();
  expected.allocated_bytes = expected.active_bytes = expected.inactive_split_bytes = 0;
  expected.reserved_bytes = 0;
  expected.num_segments = 0;
  expected.num_frees = 2;
  EXPECT_EQ(alloc.stats(), expected);  // peaks remember 4 MiB and 20 MiB

  alloc.ResetPeakStats();
  alloc.ResetAccumulatedStats();
  EXPECT_EQ(alloc.stats(), CachingAllocator::Stats{});
}

TEST(CachingAllocator, FreeOfUnknownPointerThrows) {
  FakeDevice device(1 * GiB);
  CachingAllocator alloc(&device, 0);
  try {
    alloc.Free(reinterpret_cast<void*>(0x1234));
    FAIL() << "expected kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("0x1234"), std::string::npos) << e.what();
  }
  void* p = alloc.Allocate(1000, kStreamA);
  EXPECT_THROW(alloc.Free(At(p, 512)), Error);  // inside a block is not a block
  EXPECT_THROW(alloc.RecordStream(At(p, 512), kStreamB), Error);
  alloc.Free(p);
  EXPECT_THROW(alloc.Free(p), Error);  // twice
  auto stats = alloc.stats();
  EXPECT_EQ(stats.num_frees, 1);
  EXPECT_EQ(stats.allocated_bytes, 0);
  EXPECT_EQ(alloc.Allocate(1000, kStreamA), p);  // still usable
}

TEST(CachingAllocator, ThreadsAllocateAndFreeConcurrently) {
  FakeDevice device(size_t(1) << 40);
  device.complete_on_query = true;
  CachingAllocator alloc(&device, 0);
  constexpr int kThreads = 4, kOps = 10000;
  const size_t sizes[] = {1, 700, 4096, 100000, 1 * MiB, 3 * MiB, 12 * MiB};
  std::atomic<int64_t> allocs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      const StreamHandle stream = kStreamA + t % 2;  // two threads share each stream
      std::vector<void*> live;
      for (int op = 0; op < kOps; ++op) {
        if (live.empty() || (live.size() < 64 && rng() % 2 == 0)) {
          void* p = alloc.Allocate(sizes[rng() % std::size(sizes)], stream);
          if (rng() % 10 == 0) alloc.RecordStream(p, kStreamC);
          live.push_back(p);
          allocs++;
        } else {
          size_t i = rng() % live.size();
          alloc.Free(live[i]);
          live[i] = live.back();
          live.pop_back();
        }
      }
      for (void* p : live) alloc.Free(p);
    });
  }
  for (auto& thread : threads) thread.join();
  auto stats = alloc.stats();
  EXPECT_EQ(stats.allocated_bytes, 0);
  EXPECT_EQ(stats.num_allocs, allocs.load());
  EXPECT_EQ(stats.num_frees, allocs.load());
  alloc.EmptyCache();
  stats = alloc.stats();
  EXPECT_EQ(stats.active_bytes, 0);
  EXPECT_EQ(stats.reserved_bytes, 0);
  EXPECT_EQ(stats.num_segments, 0);
  EXPECT_EQ(device.live_segments(), 0u);
  EXPECT_EQ(device.live_events(), 0u);
}

}  // namespace
}  // namespace kiln::cuda
