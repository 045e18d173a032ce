// Element types of checkpoints and caches, and scalar conversions to and from f32.
// bf16 and f16 are stored as raw uint16_t bits; fp8 e4m3 (OCP "fn": no infinities,
// max 448, 0x7f/0xff are NaN) as uint8_t bits. I8, I64 and F8_E8M0 (UE8M0 power-of-two scales,
// byte e means 2^(e - 127)) are storage types of checkpoints only (packed FP4 nibbles, hash-router
// tables, block scales); no kernel computes in them. F4_E2M1 is a weight layout, not a
// checkpoint dtype (checkpoints store it as I8 [n, k / 2]): e2m1 nibbles packed two per byte, element
// 2i in the low nibble of byte i, values kE2M1ToF32; dtype_size gives 1, the byte holding two.
// I8_SM is a weight layout too (no checkpoint stores it, dtype_from_name never gives it): int8 in
// sign and magnitude, bit 7 the sign and bits 0-6 an integer 0-127 (int8_sm_to_f32), the codes of
// an lm_head requantized to int8 at load; like fp8 codes, its weights carry f32 block scales.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace deepinfer {

enum class DType : uint8_t { F32, F16, BF16, F8_E4M3, I8, I64, F8_E8M0, F4_E2M1, I8_SM };

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);              // safetensors spelling: "F32", "BF16", ...
std::optional<DType> dtype_from_name(std::string_view name);

inline float bf16_to_f32(uint16_t bits) {
  uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float f16_to_f32(uint16_t bits);

// 2^(e - 127); 0xff (NaN in the format) gives NaN. Built from its bits (e = 0 is the subnormal
// 2^-127), not by ldexp: a library call per 32-element block had been most of the time a V4.1
// cache entry took to decode.
inline float ue8m0_to_f32(uint8_t e) {
  const uint32_t u = e == 0xff ? 0x7fc00000u : e == 0 ? 0x00400000u : uint32_t(e) << 23;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Exact value of every e4m3 code, from a 256-entry table.
extern const std::array<float, 256> kFp8E4M3ToF32;
inline float fp8_e4m3_to_f32(uint8_t bits) { return kFp8E4M3ToF32[bits]; }

// E2M1 (FP4) nibble values: sign in bit 3, then 2 exponent bits and 1 mantissa bit.
inline constexpr float kE2M1ToF32[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                         -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
// Element j of a packed F4_E2M1 row.
inline float fp4_e2m1_at(const uint8_t* packed, int64_t j) {
  return kE2M1ToF32[(packed[j / 2] >> (j % 2 ? 4 : 0)) & 15];
}

// Round to nearest even, saturating to +-448 (as torch's float8_e4m3fn cast of finite values).
uint8_t f32_to_fp8_e4m3(float f);

// The value of an I8_SM code: -(c & 0x7f) where bit 7 is set, else c.
inline float int8_sm_to_f32(uint8_t c) { return c & 0x80 ? -float(c & 0x7f) : float(c); }
// f rounded to the nearest integer (ties to even), saturating to +-127, as an I8_SM code (zero as
// 0x00 whatever its sign).
uint8_t f32_to_int8_sm(float f);

}  // namespace deepinfer
