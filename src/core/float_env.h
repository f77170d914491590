// The floating-point environment the kernels' proofs assume: round to nearest even, subnormal
// inputs and results kept as they are. A caller may run in another: PyTorch's
// set_flush_denormal(True), code built with -ffast-math (its startup sets flush-to-zero and
// denormals-are-zero) or an inference engine that sets them for speed, or a rounding mode of its
// own, or unmasked exceptions (feenableexcept). There a subnormal float32 term read as zero would
// make CumSum([1e-39, 1e-39]) give 0, not 2e-39, the exact sums would round the caller's way, and
// an infinity in the input would stop the program with SIGFPE. Every operator runs its work in the
// IEEE default and gives the caller's environment back (the exception flags its work raised stay
// raised, as after any other call).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#else
#include <cfenv>
#endif

namespace cumulus::detail {

#if defined(__x86_64__) || defined(__i386__)
// MXCSR: the six exception flags (bits 0-5), and the control bits: denormals-are-zero (6), the
// exception masks (7-12), the rounding mode (13-14) and flush-to-zero (15).
inline constexpr unsigned kMxcsrFlags = 0x3f;
inline constexpr unsigned kMxcsrDefault = 0x1f80;  // every exception masked, to nearest, no flush

class DefaultFloatEnvironment {
 public:
  DefaultFloatEnvironment() noexcept : caller_(_mm_getcsr()) {
    if ((caller_ & ~kMxcsrFlags) != kMxcsrDefault)
      _mm_setcsr(kMxcsrDefault | (caller_ & kMxcsrFlags));
  }
  ~DefaultFloatEnvironment() {
    if ((caller_ & ~kMxcsrFlags) != kMxcsrDefault) {
      _mm_setcsr((caller_ & ~kMxcsrFlags) | (_mm_getcsr() & kMxcsrFlags));
    }
  }
  DefaultFloatEnvironment(const DefaultFloatEnvironment&) = delete;
  DefaultFloatEnvironment& operator=(const DefaultFloatEnvironment&) = delete;

 private:
  unsigned caller_;
};
#else
// Elsewhere the rounding mode only (flushing subnormals is not part of <cfenv>).
class DefaultFloatEnvironment {
 public:
  DefaultFloatEnvironment() noexcept : caller_(std::fegetround()) {
    if (caller_ != FE_TONEAREST) std::fesetround(FE_TONEAREST);
  }
  ~DefaultFloatEnvironment() {
    if (caller_ != FE_TONEAREST) std::fesetround(caller_);
  }
  DefaultFloatEnvironment(const DefaultFloatEnvironment&) = delete;
  DefaultFloatEnvironment& operator=(const DefaultFloatEnvironment&) = delete;

 private:
  int caller_;
};
#endif

}  // namespace cumulus::detail
