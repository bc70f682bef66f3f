// runtime/cuda/caching_allocator.cc: block bookkeeping of the CUDA caching allocator.
//
// Note [Why cache device memory]: cudaMalloc/cudaFree synchronize the device, so an eager program
// that freed and re-allocated through the driver on every op would stall the CPU on the GPU at
// every tensor's death. Keeping freed blocks and handing them out again lets the CPU run ahead;
// the driver is only called to grow the cache, and to shrink it on empty_cache() or on OOM.
//
// Note [Stream-ordered reuse]: a block freed by the CPU may still be read by kernels queued on
// its stream. Handing it to a later request on the *same* stream is safe without any event,
// because that stream runs the new user's kernels after the old ones. Another stream has no such
// ordering, so free lists are keyed by stream and a block never changes stream. A block that
// record_stream() says is also used on other streams gets one event per such stream at Free,
// and joins a free list only once all of them have completed.
//
// Note [Split thresholds]: the small pool splits down to 512 B remainders, since 2 MiB segments
// are cheap to fill. The large pool keeps a remainder of 1 MiB or less attached to the block it
// was cut from: such a sliver could only serve small requests, which never use the large pool,
// so splitting it off would only fragment the segment.
#include "runtime/cuda/caching_allocator.h"

#include <algorithm>
#include <iomanip>
#include <limits>
#include <sstream>
#include <string>

#include "runtime/error.h"

namespace kiln::cuda {
namespace {

constexpr size_t kMinBlockSize = 512;        // every size rounds up to a multiple of this
constexpr size_t kSmallSize = 1 << 20;       // largest request of the small pool
constexpr size_t kSmallBuffer = 2 << 20;     // small pool segment size
constexpr size_t kLargeBuffer = 20 << 20;    // segment for large requests below kMinLargeAlloc
constexpr size_t kMinLargeAlloc = 10 << 20;  // from here a request gets its own segment,
constexpr size_t kRoundLarge = 2 << 20;      // rounded up to a multiple of this
// Above this, rounding up could overflow size_t; no device has that much memory anyway.
constexpr size_t kMaxRequest = std::numeric_limits<size_t>::max() / 2;

size_t RoundUp(size_t bytes, size_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

size_t RoundSize(size_t bytes) {
  return bytes < kMinBlockSize ? kMinBlockSize : RoundUp(bytes, kMinBlockSize);
}

size_t SegmentSize(size_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return RoundUp(rounded, kRoundLarge);
}

// PyTorch's format_size: "N bytes" up to 1 KiB, then KiB / MiB / GiB with two decimals.
std::string FormatSize(uint64_t size) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2);
  if (size <= 1024) {
    os << size << " bytes";
  } else if (size <= (uint64_t(1) << 20)) {
    os << size / 1024.0 << " KiB";
  } else if (size <= (uint64_t(1) << 30)) {
    os << size / 1048576.0 << " MiB";
  } else {
    os << size / 1073741824.0 << " GiB";
  }
  return os.str();
}

void RaisePeak(int64_t current, int64_t& peak) { peak = std::max(peak, current); }

}  // namespace

struct CachingAllocator::Block {
  Block(StreamHandle stream, size_t size, char* ptr, bool small)
      : stream(stream), size(size), ptr(ptr), small(small) {}
  StreamHandle stream;                 // the stream that allocated it; never changes
  size_t size;                         // bytes, a multiple of kMinBlockSize
  char* ptr;                           // device address (never dereferenced here)
  bool small;                          // small or large pool
  bool allocated = false;              // handed out and not yet freed
  int pending_events = 0;              // record_stream events still outstanding after Free
  std::set<StreamHandle> stream_uses;  // other streams it was used on (record_stream)
  Block* prev = nullptr;               // neighbours within the segment, in address order
  Block* next = nullptr;

  bool in_free_list() const { return !allocated && pending_events == 0; }
};

bool CachingAllocator::BlockOrder::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return a->stream < b->stream;
  if (a->size != b->size) return a->size < b->size;
  return a->ptr < b->ptr;
}

CachingAllocator::CachingAllocator(DeviceMemoryOps* ops, int device_index)
    : ops_(ops), device_index_(device_index) {
  KILN_CHECK(ops_ != nullptr, "[CachingAllocator] needs DeviceMemoryOps for device ", device_index);
}

CachingAllocator::~CachingAllocator() {
  for (auto& [stream, events] : pending_events_) {
    for (auto& [event, block] : events) ops_->DestroyEvent(event);
  }
  for (auto& [base, head] : segments_) {
    ops_->Free(base);
    for (Block* b = head; b != nullptr;) {
      Block* next = b->next;
      delete b;
      b = next;
    }
  }
}

void* CachingAllocator::Allocate(size_t bytes, StreamHandle stream) {
  if (bytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  ProcessCompletedEvents();
  if (bytes > kMaxRequest) {
    stats_.num_ooms += 1;
    ThrowOutOfMemory(bytes);
  }
  const size_t size = RoundSize(bytes);
  const bool small = size <= kSmallSize;
  Block* block = TakeFreeBlock(small ? small_blocks_ : large_blocks_, stream, size);
  if (block == nullptr) block = MallocSegment(small, stream, SegmentSize(size));
  // Nothing below can fail, so a throw above leaves no half-made allocation behind.
  MaybeSplit(block, size);
  block->allocated = true;
  allocated_.emplace(block->ptr, block);
  stats_.num_allocs += 1;
  stats_.allocated_bytes += block->size;
  stats_.active_bytes += block->size;
  RaisePeak(stats_.allocated_bytes, stats_.allocated_bytes_peak);
  return block->ptr;
}

void CachingAllocator::Free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  Block* block = FindAllocated(ptr, "Free");
  allocated_.erase(block->ptr);
  block->allocated = false;
  stats_.num_frees += 1;
  stats_.allocated_bytes -= block->size;
  if (block->stream_uses.empty()) {
    ReturnToFreeList(block);
    return;
  }
  // Note [Stream-ordered reuse]: one event per other stream; the block stays out of the free
  // lists (and counts as active) until ProcessCompletedEvents has seen them all complete.
  for (StreamHandle use : block->stream_uses) {
    EventHandle event = ops_->CreateEvent();
    ops_->RecordEvent(event, use);
    pending_events_[use].emplace_back(event, block);
    block->pending_events += 1;
  }
  block->stream_uses.clear();
}

void CachingAllocator::RecordStream(void* ptr, StreamHandle stream) {
  std::lock_guard<std::mutex> lock(mu_);
  Block* block = FindAllocated(ptr, "RecordStream");
  // Uses on the allocating stream are already ordered before any reuse.
  if (stream != block->stream) block->stream_uses.insert(stream);
}

void CachingAllocator::EmptyCache() {
  std::lock_guard<std::mutex> lock(mu_);
  ops_->SynchronizeDevice();
  ReleaseCachedSegments();
}

CachingAllocator::Stats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats out = stats_;
  // Derived on demand from the free lists, so it cannot drift from them: a free block counts
  // when its segment is split, i.e. it has a neighbour.
  out.inactive_split_bytes = 0;
  for (const FreeList* pool : {&small_blocks_, &large_blocks_}) {
    for (const Block* b : *pool) {
      if (b->prev != nullptr || b->next != nullptr) out.inactive_split_bytes += b->size;
    }
  }
  return out;
}

void CachingAllocator::ResetPeakStats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.allocated_bytes_peak = stats_.allocated_bytes;
  stats_.reserved_bytes_peak = stats_.reserved_bytes;
}

void CachingAllocator::ResetAccumulatedStats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.num_allocs = 0;
  stats_.num_frees = 0;
  stats_.num_ooms = 0;
  stats_.num_alloc_retries = 0;
}

std::vector<CachingAllocator::SegmentInfo> CachingAllocator::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SegmentInfo> out;
  out.reserve(segments_.size());
  for (const auto& [base, head] : segments_) {  // address order, so snapshots diff cleanly
    SegmentInfo& seg = out.emplace_back();
    seg.address = base;
    seg.stream = head->stream;
    seg.is_large = !head->small;
    for (const Block* b = head; b != nullptr; b = b->next) {
      seg.total_size += b->size;
      if (b->allocated) seg.allocated_size += b->size;
      seg.blocks.push_back({b->ptr, b->size, b->allocated, !b->allocated && b->pending_events > 0});
    }
  }
  return out;
}

// The smallest free block of at least `size` on `stream`, taken out of its free list.
CachingAllocator::Block* CachingAllocator::TakeFreeBlock(FreeList& pool, StreamHandle stream,
                                                        size_t size) {
  Block key(stream, size, nullptr, false);
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* block = *it;
  pool.erase(it);
  return block;
}

// A new segment as one block (in no free list). On OOM, gives back every cached segment and
// retries once, as PyTorch's release_cached_blocks path does.
CachingAllocator::Block* CachingAllocator::MallocSegment(bool small, StreamHandle stream,
                                                         size_t segment_size) {
  void* ptr = nullptr;
  bool ok = ops_->Malloc(&ptr, segment_size);
  if (!ok) {
    ReleaseCachedSegments();
    stats_.num_alloc_retries += 1;
    ok = ops_->Malloc(&ptr, segment_size);
  }
  if (!ok) {
    stats_.num_ooms += 1;
    ThrowOutOfMemory(segment_size);
  }
  KILN_INTERNAL_ASSERT(ptr != nullptr, "DeviceMemoryOps::Malloc succeeded with a null pointer");
  auto* block = new Block(stream, segment_size, static_cast<char*>(ptr), small);
  segments_.emplace(block->ptr, block);
  stats_.reserved_bytes += segment_size;
  stats_.num_segments += 1;
  RaisePeak(stats_.reserved_bytes, stats_.reserved_bytes_peak);
  return block;
}

// Cuts `block` down to `size`, putting the remainder after it into the free list when it is
// worth keeping apart (Note [Split thresholds]). The block keeps its address and Block object.
void CachingAllocator::MaybeSplit(Block* block, size_t size) {
  const size_t remaining = block->size - size;
  const bool split = block->small ? remaining >= kMinBlockSize : remaining > kSmallSize;
  if (!split) return;
  auto* rest = new Block(block->stream, remaining, block->ptr + size, block->small);
  rest->prev = block;
  rest->next = block->next;
  if (block->next != nullptr) block->next->prev = rest;
  block->next = rest;
  block->size = size;
  // Its neighbours are not free: `block` came from a free list (whose blocks have no free
  // neighbours) or is a whole new segment.
  PoolOf(rest).insert(rest);
}

// `block` is neither allocated nor waiting for events: merge it with free neighbours and file it.
// The lower-addressed block survives each merge, so a segment's first Block object never dies
// while the segment lives (segments_ points at it).
void CachingAllocator::ReturnToFreeList(Block* block) {
  stats_.active_bytes -= block->size;
  FreeList& pool = PoolOf(block);
  if (block->prev != nullptr && block->prev->in_free_list()) {
    Block* prev = block->prev;
    pool.erase(prev);  // before its size (part of the set's key) changes
    prev->size += block->size;
    prev->next = block->next;
    if (block->next != nullptr) block->next->prev = prev;
    delete block;
    block = prev;
  }
  if (block->next != nullptr && block->next->in_free_list()) {
    Block* next = block->next;
    pool.erase(next);
    block->size += next->size;
    block->next = next->next;
    if (next->next != nullptr) next->next->prev = block;
    delete next;
  }
  pool.insert(block);
}

// Note [Stream-ordered reuse]: called at the start of each Allocate, without waiting.
void CachingAllocator::ProcessCompletedEvents() {
  for (auto it = pending_events_.begin(); it != pending_events_.end();) {
    auto& events = it->second;
    while (!events.empty() && ops_->QueryEvent(events.front().first)) {
      auto [event, block] = events.front();
      events.pop_front();
      ops_->DestroyEvent(event);
      if (--block->pending_events == 0) ReturnToFreeList(block);
    }
    it = events.empty() ? pending_events_.erase(it) : std::next(it);
  }
}

// Waits for every outstanding event, so that blocks freed under record_stream can be released.
void CachingAllocator::SynchronizeAndDrainEvents() {
  for (auto& [stream, events] : pending_events_) {
    for (auto& [event, block] : events) {
      ops_->SynchronizeEvent(event);
      ops_->DestroyEvent(event);
      if (--block->pending_events == 0) ReturnToFreeList(block);
    }
  }
  pending_events_.clear();
}

// Gives back every segment that is a single free block; split or busy segments stay.
void CachingAllocator::ReleaseCachedSegments() {
  SynchronizeAndDrainEvents();
  for (FreeList* pool : {&small_blocks_, &large_blocks_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* block = *it;
      if (block->prev != nullptr || block->next != nullptr) {
        ++it;
        continue;
      }
      it = pool->erase(it);
      ops_->Free(block->ptr);
      segments_.erase(block->ptr);
      stats_.reserved_bytes -= block->size;
      stats_.num_segments -= 1;
      delete block;
    }
  }
}

// PyTorch's OutOfMemoryError text, so that users' habits (and searches) carry over.
void CachingAllocator::ThrowOutOfMemory(size_t tried_bytes) {
  size_t device_free = 0, device_total = 0;
  ops_->MemGetInfo(&device_free, &device_total);
  const int64_t allocated = stats_.allocated_bytes;
  throw NamedError(
      "kiln", "OutOfMemoryError",
      StrCat("CUDA out of memory. Tried to allocate ", FormatSize(tried_bytes), ". GPU ",
             device_index_, " has a total capacity of ", FormatSize(device_total), " of which ",
             FormatSize(device_free), " is free. Of the allocated memory ", FormatSize(allocated),
             " is allocated by kiln, and ", FormatSize(stats_.reserved_bytes - allocated),
             " is reserved by kiln but unallocated."));
}

CachingAllocator::Block* CachingAllocator::FindAllocated(void* ptr, const char* what) const {
  auto it = allocated_.find(ptr);
  KILN_CHECK(it != allocated_.end(), "[CachingAllocator] ", what, " of pointer ", ptr,
             ", which is not a live allocation of the caching allocator of cuda:", device_index_,
             " (freed twice, or not allocated by it)");
  return it->second;
}

CachingAllocator::FreeList& CachingAllocator::PoolOf(const Block* block) {
  return block->small ? small_blocks_ : large_blocks_;
}

}  // namespace kiln::cuda
