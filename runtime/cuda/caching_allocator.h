// runtime/cuda/caching_allocator.h: one device's caching allocator, after PyTorch's
// c10/cuda/CUDACachingAllocator.cpp, written over DeviceMemoryOps so it never names CUDA.
//
// Memory comes from the driver in segments and is handed out as blocks carved from them:
//
//   segment (one ops->Malloc)   [ block | block | block ............... ]
//                                 alloc   free    alloc   free (split remainder)
//
// - Requests round up to 512 B. Requests up to 1 MiB come from the small pool (2 MiB segments);
//   larger ones from the large pool (a 20 MiB segment below 10 MiB, else the request rounded up
//   to 2 MiB).
// - Free blocks sit per pool in a set ordered by (stream, size, address): the best fit on the
//   request's stream is one lower_bound away. A block is only reused on the stream that allocated
//   it (Note [Stream-ordered reuse] in the .cc).
// - A freed block merges with its free neighbours; a segment goes back to the driver only when
//   it is one free block, on EmptyCache() or when ops->Malloc runs out of memory.
//
// Invariants (between calls, under the lock):
//   - no two adjacent blocks of a segment are both in a free list (they would have merged);
//   - a block is exactly one of: allocated, waiting for record_stream events, in a free list;
//   - the first block of a segment keeps its Block object for the segment's life (splits and
//     merges only change the blocks after it), so `segments_` can point at it.
//
// Thread-safe: every public method takes one mutex; none calls another public method.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "runtime/cuda/device_memory.h"

namespace kiln::cuda {

class CachingAllocator {
 public:
  // The "all" aggregates of torch.cuda.memory_stats(). Byte counts are block sizes (rounded), as
  // PyTorch counts them, not the sizes callers asked for.
  struct Stats {
    int64_t allocated_bytes = 0;  // blocks handed out and not yet freed
    int64_t allocated_bytes_peak = 0;
    int64_t reserved_bytes = 0;  // segments held from the driver
    int64_t reserved_bytes_peak = 0;
    int64_t active_bytes = 0;          // allocated, plus freed blocks still waiting on events
    int64_t inactive_split_bytes = 0;  // free blocks inside segments that are split
    int64_t num_allocs = 0;            // accumulated Allocate calls that returned a block
    int64_t num_frees = 0;             // accumulated Free calls of a block
    int64_t num_ooms = 0;              // OutOfMemoryErrors thrown
    int64_t num_alloc_retries = 0;     // ops->Malloc retried after releasing cached segments
    int64_t num_segments = 0;          // current ops->Malloc segments held
    bool operator==(const Stats&) const = default;
  };

  struct BlockInfo {
    void* address = nullptr;
    size_t size = 0;
    bool allocated = false;
    bool pending_free = false;  // freed, but a record_stream event has not completed yet
    bool operator==(const BlockInfo&) const = default;
  };

  // One segment, for memory_snapshot() / memory_summary(); blocks in address order.
  struct SegmentInfo {
    void* address = nullptr;
    size_t total_size = 0;
    size_t allocated_size = 0;
    StreamHandle stream = 0;
    bool is_large = false;
    std::vector<BlockInfo> blocks;
    bool operator==(const SegmentInfo&) const = default;
  };

  // `ops` must outlive the allocator. `device_index` only names the GPU in error messages.
  CachingAllocator(DeviceMemoryOps* ops, int device_index);
  // Gives every segment back to the driver: pointers still allocated become invalid.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes` for use on `stream`; nullptr for 0 bytes. Throws
  // NamedError("kiln", "OutOfMemoryError") when the driver cannot supply a segment even after
  // the cache is emptied; nothing is allocated then.
  void* Allocate(size_t bytes, StreamHandle stream);
  // Free(nullptr) does nothing; a pointer this allocator did not hand out throws kiln::Error.
  void Free(void* ptr);
  // `ptr` is also used on `stream`: when freed, it is not reused until that stream's work so far
  // has finished (torch.Tensor.record_stream).
  void RecordStream(void* ptr, StreamHandle stream);
  // Waits for the device, then gives every wholly free segment back to the driver.
  void EmptyCache();

  Stats stats() const;
  void ResetPeakStats();         // peaks become the current values
  void ResetAccumulatedStats();  // num_allocs, num_frees, num_ooms, num_alloc_retries to 0
  std::vector<SegmentInfo> Snapshot() const;

 private:
  struct Block;
  struct BlockOrder {  // (stream, size, address): best fit per stream by lower_bound
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeList = std::set<Block*, BlockOrder>;

  Block* TakeFreeBlock(FreeList& pool, StreamHandle stream, size_t size);
  Block* MallocSegment(bool small, StreamHandle stream, size_t segment_size);
  void MaybeSplit(Block* block, size_t size);
  void ReturnToFreeList(Block* block);
  void ProcessCompletedEvents();
  void SynchronizeAndDrainEvents();
  void ReleaseCachedSegments();
  [[noreturn]] void ThrowOutOfMemory(size_t tried_bytes);
  Block* FindAllocated(void* ptr, const char* what) const;
  FreeList& PoolOf(const Block* block);

  DeviceMemoryOps* const ops_;
  const int device_index_;
  mutable std::mutex mu_;
  FreeList small_blocks_;
  FreeList large_blocks_;
  std::unordered_map<void*, Block*> allocated_;  // handed-out blocks by address
  std::map<char*, Block*> segments_;             // segment base -> its first block
  // Events recorded at Free for record_stream uses, per stream in recording order: a stream
  // completes its events in order, so the first incomplete one ends the scan of that stream.
  std::map<StreamHandle, std::deque<std::pair<EventHandle, Block*>>> pending_events_;
  Stats stats_;
};

}  // namespace kiln::cuda
