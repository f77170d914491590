#include "core/parallel.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "core/float_env.h"
#include "cumulus/ops.h"

namespace cumulus {
namespace detail {
namespace {

thread_local bool tls_in_pool = false;

// Waiting threads spin this many rounds before they sleep: a scan of a long row hands out work
// every few hundred microseconds, and waking a sleeping thread costs tens of them here.
constexpr int kSpinRounds = 4000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Spins on `ready`, then sleeps on `cv` until it holds.
template <class Ready>
void await(std::mutex& mutex, std::condition_variable& cv, const Ready& ready) {
  for (int i = 0; i < kSpinRounds; ++i) {
    if (ready()) return;
    cpu_relax();
  }
  std::unique_lock lock(mutex);
  cv.wait(lock, ready);
}

// Wakes sleepers after a change they wait for; taking the mutex first means none can miss it
// between checking and sleeping.
void signal(std::mutex& mutex, std::condition_variable& cv) {
  { std::lock_guard lock(mutex); }
  cv.notify_all();
}

class Pool {
 public:
  ~Pool() { resize(1); }

  int threads() const noexcept { return threads_.load(std::memory_order_relaxed); }

  void resize(int threads) {
    std::lock_guard run_lock(run_mutex_);
    stop_.store(true);
    signal(mutex_, wake_);
    for (auto& w : workers_) w.join();
    workers_.clear();
    stop_.store(false);
    threads_.store(threads, std::memory_order_relaxed);
    // New workers wait for the next job, not the last one.
    const uint64_t current = generation_.load();
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, current] { work(current); });
  }

  void run(std::size_t chunks, std::size_t count, std::size_t grain, RangeFn fn,
           const void* context) {
    std::lock_guard run_lock(run_mutex_);  // one job at a time
    // No worker reads the job now: each left the previous one before it returned.
    job_ = Job{fn, context, count, grain, chunks};
    next_.store(0);
    left_.store(0);
    generation_.fetch_add(1, std::memory_order_release);
    signal(mutex_, wake_);
    drain(job_);
    // Every worker must take this job and leave it, so none still holds it when the next job
    // resets the counters; once all have left, every chunk is done.
    const std::size_t workers = workers_.size();
    await(mutex_, finished_, [&] { return left_.load(std::memory_order_acquire) == workers; });
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
    }
  }

  void work(uint64_t seen) {
    tls_in_pool = true;
    // A worker starts in its creator's environment; it runs only the operators' work.
    const DefaultFloatEnvironment environment;
    for (;;) {
      await(mutex_, wake_,
            [&] { return stop_.load() || generation_.load(std::memory_order_acquire) != seen; });
      if (stop_.load()) return;
      seen = generation_.load(std::memory_order_acquire);
      drain(job_);
      if (left_.fetch_add(1, std::memory_order_acq_rel) + 1 == workers_count()) {
        signal(mutex_, finished_);
      }
    }
  }

  std::size_t workers_count() const noexcept {
    return static_cast<std::size_t>(threads_.load(std::memory_order_relaxed) - 1);
  }

  std::mutex run_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::vector<std::thread> workers_;
  std::atomic<int> threads_{1};
  Job job_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  std::atomic<std::size_t> next_{0}, left_{0};
};

int default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(std::min(n, 256u));
}

// A forked child has only the thread that called fork(): the pool's workers stay in the parent,
// and a job handed to them would wait for ever (Python's multiprocessing forks by default on Linux,
// and so do Dask's process workers and PyTorch's DataLoader). The child leaves the parent's pool as
// it is (its threads and locks are the parent's) and makes its own, of the same size, when it next
// needs one. The mutex is held across fork(), so no child starts with it locked by a thread it
// does not have.
std::mutex pool_mutex;
std::atomic<Pool*> current_pool{nullptr};
int forked_threads = 0;  // the size of the pool a forked child makes; 0: the default

void before_fork() { pool_mutex.lock(); }
void after_fork_in_parent() { pool_mutex.unlock(); }
void after_fork_in_child() {
  if (const Pool* p = current_pool.load(std::memory_order_relaxed)) forked_threads = p->threads();
  current_pool.store(nullptr, std::memory_order_relaxed);
  pool_mutex.unlock();
}

Pool& pool() {
  if (Pool* p = current_pool.load(std::memory_order_acquire)) return *p;
  std::lock_guard lock(pool_mutex);
  Pool* p = current_pool.load(std::memory_order_relaxed);
  if (p == nullptr) {
    static const bool registered =
        pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child) == 0;
    (void)registered;  // without the handlers a forked child's jobs would wait, as before
    p = new Pool;      // never destroyed: workers must outlive static destructors
    p->resize(forked_threads > 0 ? forked_threads : default_threads());
    current_pool.store(p, std::memory_order_release);
  }
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

std::size_t parallel_width() noexcept {
  return tls_in_pool ? 1 : static_cast<std::size_t>(pool().threads());
}

}  // namespace detail

void set_num_threads(int n) { detail::pool().resize(std::clamp(n, 1, 256)); }
int num_threads() noexcept { return detail::pool().threads(); }

}  // namespace cumulus
