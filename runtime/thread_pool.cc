// runtime/thread_pool.cc: the worker pool behind ParallelFor.
//
// One region runs at a time (a mutex serialises callers); the caller works on the region's chunks
// too, so a pool of n threads uses n-1 workers. Region N+1 starts only after every chunk of N has
// finished.
//
// Note [Claimed chunks]: chunks are claimed, not assigned: the caller and each worker take the
// next unclaimed chunk until none is left. With chunk i handed to worker i, one descheduled
// worker (another process on a shared machine) stalled every parallel kernel until it ran again:
// a compiled training step of hundreds of small kernels once ran 7x slower at two threads than
// alone. Now the caller runs that chunk itself after its own. The claim word holds the region's
// number beside the next chunk index, so a worker late from an earlier region claims nothing of
// a later one. Chunk boundaries do not move, so results do not depend on which thread ran what.
#include "runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/error.h"

namespace kiln {
namespace {

thread_local bool tls_in_parallel = false;

// Note [Spinning workers]: waking a thread blocked on a condition variable takes tens of
// microseconds, a few percent of a 1 ms kernel. Workers (and the caller waiting for them) spin on
// atomics for a short while before blocking, so back-to-back eager ops start at once; idle
// workers still end up asleep.
constexpr int kSpinIterations = 20000;  // ~100 us of _mm_pause

inline void CpuRelax() { __builtin_ia32_pause(); }

class ThreadPool {
 public:
  explicit ThreadPool(int n) : num_threads_(std::max(1, n)) {
    for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this] { WorkerLoop(); });
  }

  int num_threads() const { return num_threads_; }

  void Run(int64_t begin, int64_t end, int64_t chunks, FunctionRef<void(int64_t, int64_t)> fn) {
    std::lock_guard<std::mutex> region(region_mu_);
    const int64_t per = (end - begin + chunks - 1) / chunks;
    uint64_t number;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = &fn;
      begin_ = begin;
      end_ = end;
      per_ = per;
      chunks_ = chunks;
      error_ = nullptr;
      pending_.store(chunks, std::memory_order_relaxed);
      number = generation_.fetch_add(1, std::memory_order_relaxed) + 1;
      claim_.store(ClaimWord(number, 0), std::memory_order_release);
    }
    cv_.notify_all();
    Work(number, chunks);
    for (int i = 0; i < kSpinIterations && pending_.load(std::memory_order_acquire) != 0; ++i) CpuRelax();
    if (pending_.load(std::memory_order_acquire) != 0) {
      std::unique_lock<std::mutex> lock(mu_);
      done_cv_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
    }
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // The claim word: the region's number (low 32 bits) over the next chunk index (Note [Claimed chunks]).
  static uint64_t ClaimWord(uint64_t region, uint64_t chunk) { return (region << 32) | chunk; }

  // Claims and runs chunks of region `number` until none is left.
  void Work(uint64_t number, int64_t chunks) {
    uint64_t word = claim_.load(std::memory_order_acquire);
    while (true) {
      if ((word >> 32) != (number & 0xffffffffu) || static_cast<int64_t>(word & 0xffffffffu) >= chunks) return;
      if (!claim_.compare_exchange_weak(word, word + 1, std::memory_order_acq_rel, std::memory_order_acquire))
        continue;  // `word` now holds the current claim word
      RunChunk(static_cast<int64_t>(word & 0xffffffffu));
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mu_);  // pairs with the caller's wait predicate
        done_cv_.notify_one();
      }
      word = claim_.load(std::memory_order_acquire);
    }
  }

  void RunChunk(int64_t c) {
    int64_t b = begin_ + c * per_, e = std::min(end_, b + per_);
    if (b >= e) return;
    tls_in_parallel = true;
    try {
      (*fn_)(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
    }
    tls_in_parallel = false;
  }

  void WorkerLoop() {
    uint64_t seen = 0;
    while (true) {
      for (int i = 0; i < kSpinIterations && generation_.load(std::memory_order_acquire) == seen; ++i) CpuRelax();
      if (generation_.load(std::memory_order_acquire) == seen) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      }
      int64_t chunks;
      {
        // Generation and chunk count are written together under mu_; read them together, so a
        // worker that wakes late never mixes one region's count with another's generation.
        std::lock_guard<std::mutex> lock(mu_);
        seen = generation_.load(std::memory_order_relaxed);
        chunks = chunks_;
      }
      Work(seen, chunks);
    }
  }

  const int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex region_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  const FunctionRef<void(int64_t, int64_t)>* fn_ = nullptr;  // the running region's, on Run's stack
  int64_t begin_ = 0, end_ = 0, per_ = 0, chunks_ = 0;
  std::atomic<int64_t> pending_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<uint64_t> claim_{0};
  std::exception_ptr error_;
};

std::atomic<int> g_requested_threads{0};

ThreadPool& Pool() {
  // Leaked on purpose: workers must outlive static destruction at interpreter exit.
  static ThreadPool* pool = [] {
    int n = g_requested_threads.load();
    if (n <= 0) n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    return new ThreadPool(n);
  }();
  return *pool;
}

}  // namespace

int GetNumThreads() {
  int n = g_requested_threads.load();
  return n > 0 ? std::min(n, Pool().num_threads()) : Pool().num_threads();
}

void SetNumThreads(int n) {
  KILN_CHECK_VALUE(n >= 1, "set_num_threads expects a positive integer, got ", n);
  g_requested_threads.store(n);
}

bool InParallelRegion() { return tls_in_parallel; }

void ParallelFor(int64_t begin, int64_t end, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn) {
  if (begin >= end) return;
  const int64_t n = end - begin;
  int64_t chunks = std::min<int64_t>(GetNumThreads(), (n + grain - 1) / std::max<int64_t>(grain, 1));
  if (chunks <= 1 || tls_in_parallel) {
    fn(begin, end);
    return;
  }
  Pool().Run(begin, end, chunks, fn);
}

}  // namespace kiln
