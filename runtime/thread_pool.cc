// runtime/thread_pool.cc: the worker pool behind ParallelFor.
//
// One region runs at a time (a mutex serialises callers); the caller takes chunk 0 itself and
// waits for the workers' chunks, so a pool of n threads uses n-1 workers.
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

class ThreadPool {
 public:
  explicit ThreadPool(int n) : num_threads_(std::max(1, n)) {
    for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
  }

  int num_threads() const { return num_threads_; }

  void Run(int64_t begin, int64_t end, int64_t chunks,
           const std::function<void(int64_t, int64_t)>& fn) {
    std::lock_guard<std::mutex> region(region_mu_);
    const int64_t per = (end - begin + chunks - 1) / chunks;
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = &fn;
      begin_ = begin;
      end_ = end;
      per_ = per;
      chunks_ = chunks;
      pending_ = chunks - 1;
      error_ = nullptr;
      ++generation_;
    }
    cv_.notify_all();
    RunChunk(0);
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return pending_ == 0; });
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
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

  void WorkerLoop(int index) {
    uint64_t seen = 0;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (index >= chunks_) continue;
      }
      RunChunk(index);
      std::lock_guard<std::mutex> lock(mu_);
      if (--pending_ == 0) done_cv_.notify_one();
    }
  }

  const int num_threads_;
  std::vector<std::thread> workers_;
  std::mutex region_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t begin_ = 0, end_ = 0, per_ = 0, chunks_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
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

void ParallelFor(int64_t begin, int64_t end, int64_t grain,
                 const std::function<void(int64_t, int64_t)>& fn) {
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
