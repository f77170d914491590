// Settings that last for one scope of a test: the size thresholds (detail::set_tuning) and the
// thread count, restored when the scope ends.
#pragma once

#include "cumulus/ops.h"
#include "ops/tuning.h"

namespace cumulus::testing {

class ScopedTuning {
 public:
  explicit ScopedTuning(const detail::Tuning& values) { detail::set_tuning(values); }
  ~ScopedTuning() { detail::set_tuning({}); }
  ScopedTuning(const ScopedTuning&) = delete;
  ScopedTuning& operator=(const ScopedTuning&) = delete;
};

class ScopedThreads {
 public:
  explicit ScopedThreads(int n) { set_num_threads(n); }
  ~ScopedThreads() { set_num_threads(saved_); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int saved_ = num_threads();
};

}  // namespace cumulus::testing
