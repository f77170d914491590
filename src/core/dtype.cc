#include "cumulus/dtype.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace cumulus {
namespace {

// A binary format with a sign bit, kExpBits of exponent and kMantBits of stored mantissa:
// binary16 is <5, 10>, bfloat16 is <8, 7>.
template <int kExpBits, int kMantBits>
struct SmallFloat {
  static constexpr int kBias = (1 << (kExpBits - 1)) - 1;
  static constexpr uint32_t kMantMask = (1u << kMantBits) - 1;
  static constexpr uint32_t kExpAllOnes = ((1u << kExpBits) - 1) << kMantBits;

  static float widen(uint16_t h) noexcept {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    const uint32_t exp = (h & kExpAllOnes) >> kMantBits;
    const uint32_t mant = h & kMantMask;
    if (exp == (kExpAllOnes >> kMantBits)) {  // infinity or NaN, payload kept
      return std::bit_cast<float>(sign | 0x7f800000u | (mant << (23 - kMantBits)));
    }
    if (exp == 0) {  // zero or subnormal: exact in float
      const float magnitude = std::ldexp(static_cast<float>(mant), 1 - kBias - kMantBits);
      return sign != 0 ? -magnitude : magnitude;
    }
    const uint32_t float_exp = exp - kBias + 127;
    return std::bit_cast<float>(sign | (float_exp << 23) | (mant << (23 - kMantBits)));
  }

  static uint16_t narrow(double v) noexcept {
    const auto bits = std::bit_cast<uint64_t>(v);
    const auto sign = static_cast<uint16_t>((bits >> 63) << 15);
    const uint64_t magnitude = bits & ~(uint64_t{1} << 63);
    constexpr uint64_t kDoubleInf = 0x7ff0000000000000;
    if (magnitude >= kDoubleInf) {
      if (magnitude == kDoubleInf) return static_cast<uint16_t>(sign | kExpAllOnes);
      // NaN: keep the top of the payload and set the quiet bit so it cannot become infinity.
      const auto payload = static_cast<uint32_t>(magnitude >> (52 - kMantBits)) & kMantMask;
      return static_cast<uint16_t>(sign | kExpAllOnes | payload | (1u << (kMantBits - 1)));
    }
    const int biased = static_cast<int>(magnitude >> 52);
    uint64_t significand = magnitude & ((uint64_t{1} << 52) - 1);
    if (biased != 0) significand |= uint64_t{1} << 52;
    const int exponent = std::max(biased, 1) - 1023;  // v = significand * 2^(exponent - 52)
    if (exponent + kBias >= (1 << kExpBits) - 1) return static_cast<uint16_t>(sign | kExpAllOnes);
    // Below the normal range the target's ulp stops shrinking: drop more bits.
    const int target_exponent = std::max(exponent, 1 - kBias);
    const int shift = 52 - kMantBits + (target_exponent - exponent);
    if (shift >= 54) return sign;  // under half the smallest subnormal
    uint64_t rounded = significand >> shift;
    const uint64_t rest = significand & ((uint64_t{1} << shift) - 1);
    const uint64_t halfway = uint64_t{1} << (shift - 1);
    if (rest > halfway || (rest == halfway && (rounded & 1) != 0)) ++rounded;
    // `rounded` carries the implicit bit, which adds one to the exponent field; a carry out of
    // the mantissa moves to the next binade, up to infinity, as it should.
    const auto field = static_cast<uint64_t>(target_exponent + kBias - 1) << kMantBits;
    return static_cast<uint16_t>(sign | (field + rounded));
  }
};

using Binary16 = SmallFloat<5, 10>;
using Brain16 = SmallFloat<8, 7>;

}  // namespace

float to_float(Float16 h) noexcept { return Binary16::widen(h.bits); }
float to_float(BFloat16 h) noexcept { return Brain16::widen(h.bits); }
Float16 to_float16(double v) noexcept { return {Binary16::narrow(v)}; }
BFloat16 to_bfloat16(double v) noexcept { return {Brain16::narrow(v)}; }

std::optional<DType> dtype_from_name(std::string_view name) noexcept {
  for (DType t : kAllDTypes) {
    if (dtype_name(t) == name) return t;
  }
  return std::nullopt;
}

}  // namespace cumulus
