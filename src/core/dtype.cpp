#include "core/dtype.h"

#include <algorithm>
#include <cmath>
#include <array>

namespace deepinfer {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::F8_E4M3: return 1;
    case DType::I8: return 1;
    case DType::I64: return 8;
    case DType::F8_E8M0: return 1;
    case DType::F4_E2M1: return 1;
    case DType::I8_SM: return 1;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::F8_E4M3: return "F8_E4M3";
    case DType::I8: return "I8";
    case DType::I64: return "I64";
    case DType::F8_E8M0: return "F8_E8M0";
    case DType::F4_E2M1: return "F4_E2M1";
    case DType::I8_SM: return "I8_SM";
  }
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  if (name == "F32") return DType::F32;
  if (name == "F16") return DType::F16;
  if (name == "BF16") return DType::BF16;
  if (name == "F8_E4M3") return DType::F8_E4M3;
  if (name == "I8") return DType::I8;
  if (name == "I64") return DType::I64;
  if (name == "F8_E8M0") return DType::F8_E8M0;
  return std::nullopt;
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float v;
  if (exp == 0) v = std::ldexp(float(mant), -24);
  else if (exp == 31) v = mant ? NAN : INFINITY;
  else v = std::ldexp(float(mant | 0x400u), int(exp) - 25);
  return sign ? -v : v;
}

uint8_t f32_to_int8_sm(float f) {
  const float m = std::min(127.0f, std::nearbyint(std::fabs(f)));  // the default rounding: ties to even
  return m == 0.0f ? 0 : uint8_t((f < 0.0f ? 0x80 : 0) | int(m));
}

namespace {
constexpr float pow2(int e) {
  float r = 1.0f;
  for (; e > 0; --e) r *= 2.0f;
  for (; e < 0; ++e) r *= 0.5f;
  return r;
}
constexpr std::array<float, 256> make_fp8_table() {
  std::array<float, 256> v{};
  for (int b = 0; b < 256; ++b) {
    const int sign = b >> 7, exp = (b >> 3) & 0xf, mant = b & 7;
    float x;
    if (exp == 0xf && mant == 7) x = __builtin_nanf("");
    else if (exp == 0) x = float(mant) * pow2(-9);             // subnormal: mant/8 * 2^-6
    else x = float(8 + mant) * pow2(exp - 10);                 // (1 + mant/8) * 2^(exp-7)
    v[b] = sign ? -x : x;
  }
  return v;
}
}  // namespace

constinit const std::array<float, 256> kFp8E4M3ToF32 = make_fp8_table();

uint8_t f32_to_fp8_e4m3(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint8_t sign = uint8_t((u >> 24) & 0x80);
  u &= 0x7fffffffu;
  if (u > 0x7f800000u) return 0x7f;               // NaN
  if (u >= 0x43e00000u) return sign | 0x7e;       // >= 448 (infinity included): the largest finite
  if (u < 0x3c800000u) {                          // below 2^-6: subnormal codes, k * 2^-9 (k = 8 is 2^-6)
    float a;
    std::memcpy(&a, &u, 4);
    return sign | uint8_t(std::nearbyint(a * 512.0f));  // exact product; ties to even k
  }
  // Normal: keep 3 of the 23 mantissa bits, ties to even; a carry moves into the exponent, and no
  // value below 448 rounds past it.
  const uint32_t r = u + 0x7ffffu + ((u >> 20) & 1u);
  const uint32_t e = (r >> 23) - 127 + 7, m = (r >> 20) & 7u;
  return sign | uint8_t(e << 3 | m);
}

}  // namespace deepinfer
