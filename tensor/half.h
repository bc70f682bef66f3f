// tensor/half.h: the 16-bit float storage types, float16 (IEEE binary16) and bfloat16.
//
// Both store 16 bits and compute through float: arithmetic converts, operates in float, and
// rounds back to nearest-even, which is what PyTorch's CPU kernels do for these dtypes.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

namespace kiln {

namespace detail {
inline float BitsToFloat(uint32_t b) { float f; std::memcpy(&f, &b, 4); return f; }
inline uint32_t FloatToBits(float f) { uint32_t b; std::memcpy(&b, &f, 4); return b; }
}  // namespace detail

struct alignas(2) BFloat16 {
  uint16_t x = 0;
  BFloat16() = default;
  BFloat16(float f) : x(Round(f)) {}  // NOLINT: implicit like a builtin float type
  operator float() const { return detail::BitsToFloat(uint32_t(x) << 16); }
  static BFloat16 FromBits(uint16_t b) { BFloat16 h; h.x = b; return h; }
  static uint16_t Round(float f) {
    if (f != f) return 0x7fc0;  // quiet NaN
    uint32_t b = detail::FloatToBits(f);
    uint32_t lsb = (b >> 16) & 1;
    return static_cast<uint16_t>((b + 0x7fff + lsb) >> 16);
  }
};

struct alignas(2) Half {
  uint16_t x = 0;
  Half() = default;
  Half(float f) : x(FromFloat(f)) {}  // NOLINT
  operator float() const { return ToFloat(x); }
  static Half FromBits(uint16_t b) { Half h; h.x = b; return h; }

  static float ToFloat(uint16_t h) {
    uint32_t sign = uint32_t(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    if (exp == 0x1f) return detail::BitsToFloat(sign | 0x7f800000 | (mant << 13));
    if (exp == 0) {
      if (mant == 0) return detail::BitsToFloat(sign);
      float f = static_cast<float>(mant) * (1.0f / 16777216.0f);  // subnormal: mant * 2^-24
      return sign ? -f : f;
    }
    return detail::BitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
  }
  static uint16_t FromFloat(float f) {
    uint32_t b = detail::FloatToBits(f);
    uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000);
    uint32_t abs = b & 0x7fffffff;
    if (abs > 0x7f800000) return sign | 0x7e00;                // NaN
    if (abs >= 0x477ff000) return sign | 0x7c00;               // overflow (rounds to inf)
    if (abs < 0x38800000) {                                   // subnormal or zero in half
      float a = detail::BitsToFloat(abs);
      // Scale into the subnormal range and round to nearest-even with the FPU.
      float scaled = a * 16777216.0f;  // a / 2^-24
      uint32_t m = static_cast<uint32_t>(scaled);
      float rem = scaled - static_cast<float>(m);
      if (rem > 0.5f || (rem == 0.5f && (m & 1))) ++m;
      return sign | static_cast<uint16_t>(m);
    }
    uint32_t mant_odd = (abs >> 13) & 1;
    abs += 0xfff + mant_odd;  // round to nearest-even on the 13 dropped bits
    return sign | static_cast<uint16_t>(((abs >> 23) - 112) << 10 | ((abs >> 13) & 0x3ff));
  }
};

}  // namespace kiln

namespace std {
template <> class numeric_limits<kiln::Half> {
 public:
  static constexpr bool is_specialized = true, is_signed = true, is_integer = false, has_infinity = true;
  static kiln::Half lowest() { return kiln::Half::FromBits(0xfbff); }
  static kiln::Half max() { return kiln::Half::FromBits(0x7bff); }
  static kiln::Half min() { return kiln::Half::FromBits(0x0400); }
  static kiln::Half epsilon() { return kiln::Half::FromBits(0x1400); }
  static kiln::Half infinity() { return kiln::Half::FromBits(0x7c00); }
  static kiln::Half quiet_NaN() { return kiln::Half::FromBits(0x7e00); }
};
template <> class numeric_limits<kiln::BFloat16> {
 public:
  static constexpr bool is_specialized = true, is_signed = true, is_integer = false, has_infinity = true;
  static kiln::BFloat16 lowest() { return kiln::BFloat16::FromBits(0xff7f); }
  static kiln::BFloat16 max() { return kiln::BFloat16::FromBits(0x7f7f); }
  static kiln::BFloat16 min() { return kiln::BFloat16::FromBits(0x0080); }
  static kiln::BFloat16 epsilon() { return kiln::BFloat16::FromBits(0x3c00); }
  static kiln::BFloat16 infinity() { return kiln::BFloat16::FromBits(0x7f80); }
  static kiln::BFloat16 quiet_NaN() { return kiln::BFloat16::FromBits(0x7fc0); }
};
}  // namespace std
