#include "core/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "cumulus/ops.h"

namespace cumulus {
namespace detail {
namespace {

thread_local bool tls_in_pool = false;

class Pool {
 public:
  ~Pool() { resize(1); }

  int threads() const noexcept { return threads_.load(std::memory_order_relaxed); }

  void resize(int threads) {
    std::lock_guard run_lock(run_mutex_);
    stop_workers();
    threads_.store(threads, std::memory_order_relaxed);
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }

  void run(std::size_t chunks, std::size_t count, std::size_t grain, RangeFn fn,
           const void* context) {
    std::lock_guard run_lock(run_mutex_);  // one job at a time
    {
      std::lock_guard lock(mutex_);
      job_ = Job{fn, context, count, grain, chunks};
      next_.store(0);
      done_.store(0);
      joined_ = 0;
      ++generation_;
    }
    wake_.notify_all();
    drain(job_);
    std::unique_lock lock(mutex_);
    // Every worker must have taken this job and left it, so none still holds it when the next
    // job resets the counters.
    finished_.wait(
        lock, [&] { return done_.load() == chunks && joined_ == workers_.size() && busy_ == 0; });
  }

 private:
  struct Job {
    RangeFn fn = nullptr;
    const void* context = nullptr;
    std::size_t count = 0, grain = 1, chunks = 0;
  };

  void drain(const Job& job) {
    for (;;) {
      const std::size_t chunk = next_.fetch_add(1);
      if (chunk >= job.chunks) return;
      const std::size_t begin = chunk * job.grain;
      job.fn(job.context, begin, std::min(job.count, begin + job.grain));
      if (done_.fetch_add(1) + 1 == job.chunks) {
        std::lock_guard lock(mutex_);
        finished_.notify_all();
      }
    }
  }

  void work() {
    tls_in_pool = true;
    uint64_t seen = 0;
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      const Job job = job_;
      ++joined_;
      ++busy_;
      lock.unlock();
      drain(job);
      lock.lock();
      if (--busy_ == 0) finished_.notify_all();
    }
  }

  void stop_workers() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
    stop_ = false;
  }

  std::mutex run_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::vector<std::thread> workers_;
  std::atomic<int> threads_{1};
  Job job_;
  uint64_t generation_ = 0;
  std::size_t joined_ = 0;
  int busy_ = 0;
  bool stop_ = false;
  std::atomic<std::size_t> next_{0}, done_{0};
};

int default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(std::min(n, 256u));
}

Pool& pool() {
  static Pool* p = [] {
    auto* created = new Pool;  // never destroyed: workers must outlive static destructors
    created->resize(default_threads());
    return created;
  }();
  return *p;
}

}  // namespace

void parallel_for_impl(std::size_t count, std::size_t grain, RangeFn fn, const void* context) {
  if (count == 0) return;
  grain = std::max<std::size_t>(grain, 1);
  const std::size_t chunks = (count + grain - 1) / grain;
  if (chunks == 1 || tls_in_pool || pool().threads() == 1) {
    for (std::size_t begin = 0; begin < count; begin += grain) {
      fn(context, begin, std::min(count, begin + grain));
    }
    return;
  }
  pool().run(chunks, count, grain, fn, context);
}

}  // namespace detail

void set_num_threads(int n) { detail::pool().resize(std::clamp(n, 1, 256)); }
int num_threads() noexcept { return detail::pool().threads(); }

}  // namespace cumulus
