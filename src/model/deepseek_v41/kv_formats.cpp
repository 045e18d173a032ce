#include "model/deepseek_v41/kv_formats.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "core/dtype.h"

namespace deepinfer {
namespace {

// Nearest e2m1 code of v (|v| <= 6), ties to the even code; bit 3 is the sign. The codes' values
// are 0, .5, 1, 1.5, 2, 3, 4, 6: |v| passes the midpoints .25, .75, 1.25, 1.75, 2.5, 3.5 and 5,
// each a tie that goes to the even code below (>) or above (>=). NaN compares false: code 0.
uint8_t e2m1_code(float v) {
  const float a = std::fabs(v);
  const int best = int(a > 0.25f) + int(a >= 0.75f) + int(a > 1.25f) + int(a >= 1.75f) + int(a > 2.5f) +
                   int(a >= 3.5f) + int(a > 5.0f);
  return uint8_t(best | (std::signbit(v) && best != 0 ? 8 : 0));
}

// e2m1 code c's value, bit 3 the sign.
constexpr float kE2M1Signed[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                   -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
float e2m1_value(uint8_t code) { return kE2M1Signed[code & 15]; }

// Exponent k with 2^k = 2^ceil(log2(t)), t > 0 finite.
int ceil_log2(float t) {
  int e;
  const float m = std::frexp(t, &e);  // t = m 2^e, m in [0.5, 1)
  return m == 0.5f ? e - 1 : e;
}

float amax_of(const float* x, int n) {
  float a = 0;
  for (int i = 0; i < n; ++i) a = std::max(a, std::fabs(x[i]));
  return a;
}

// One block: scale and codes (e4m3 or e2m1), as the format's reference function.
float block_scale(V41KvFormat f, const float* x, int n) {
  const float amax = amax_of(x, n);
  switch (f) {
    case V41KvFormat::kFp8Block32: return std::ldexp(1.0f, ceil_log2(std::max(amax, 1e-4f) * (1.0f / 448.0f)));
    case V41KvFormat::kFp4E4m3Block16: return fp8_e4m3_to_f32(f32_to_fp8_e4m3(std::max(amax, 6.0f * 0x1p-9f) / 6.0f));
    case V41KvFormat::kFp4Ue8m0Block32:
      return std::ldexp(1.0f, ceil_log2(std::max(amax, 6.0f * 0x1p-126f) * (1.0f / 6.0f)));
    default: DI_CHECK(false); return 1;
  }
}

uint8_t ue8m0_byte(float s) {  // s a power of two
  int e;
  std::frexp(s, &e);
  return uint8_t(e - 1 + 127);
}

}  // namespace

size_t v41_kv_bytes(V41KvFormat f, int n) {
  switch (f) {
    case V41KvFormat::kF32: return size_t(n) * 4;
    case V41KvFormat::kFp8Block32: return size_t(n) + size_t(n / 32);
    case V41KvFormat::kFp4E4m3Block16: return size_t(n / 2) + size_t(n / 16);
    case V41KvFormat::kFp4Ue8m0Block32: return size_t(n / 2) + size_t(n / 32);
  }
  return 0;
}

void v41_kv_store(V41KvFormat f, const float* x, int n, uint8_t* dst) {
  if (f == V41KvFormat::kF32) {
    std::memcpy(dst, x, size_t(n) * 4);
    return;
  }
  const int B = kV41KvBlock[int(f)];
  DI_CHECK(n % B == 0);
  const size_t value_bytes = f == V41KvFormat::kFp8Block32 ? size_t(n) : size_t(n / 2);
  uint8_t* scales = dst + value_bytes;
  if (f != V41KvFormat::kFp8Block32) std::memset(dst, 0, value_bytes);
  for (int b = 0; b < n / B; ++b) {
    const float* xb = x + b * B;
    const float s = block_scale(f, xb, B);
    if (f == V41KvFormat::kFp8Block32) {
      for (int i = 0; i < B; ++i) dst[b * B + i] = f32_to_fp8_e4m3(std::clamp(xb[i] / s, -448.0f, 448.0f));
      scales[b] = ue8m0_byte(s);
    } else {
      for (int i = 0; i < B; ++i) {
        const int j = b * B + i;
        dst[j / 2] |= uint8_t(e2m1_code(std::clamp(xb[i] / s, -6.0f, 6.0f)) << (j % 2 ? 4 : 0));
      }
      scales[b] = f == V41KvFormat::kFp4E4m3Block16 ? f32_to_fp8_e4m3(s) : ue8m0_byte(s);
    }
  }
}

namespace {

// put(j, value) for each of the n stored values of a non-f32 format.
template <class Put>
void load_values(V41KvFormat f, const uint8_t* src, int n, Put&& put) {
  const int B = kV41KvBlock[int(f)];
  DI_CHECK(f == V41KvFormat::kFp8Block32 || n % 2 == 0);
  const uint8_t* scales = src + (f == V41KvFormat::kFp8Block32 ? size_t(n) : size_t(n / 2));
  for (int j0 = 0; j0 < n; j0 += B) {  // each block's scale decoded once (ue8m0_to_f32 is an ldexp)
    const uint8_t sb = scales[j0 / B];
    const float s = f == V41KvFormat::kFp4E4m3Block16 ? fp8_e4m3_to_f32(sb) : ue8m0_to_f32(sb);
    const int j1 = std::min(n, j0 + B);
    if (f == V41KvFormat::kFp8Block32) {
      for (int j = j0; j < j1; ++j) put(j, fp8_e4m3_to_f32(src[j]) * s);
    } else {
      for (int j = j0; j < j1; j += 2) {  // byte j / 2: element j in its low nibble, j + 1 in its high
        const uint8_t b = src[j / 2];
        put(j, e2m1_value(b & 15) * s);
        put(j + 1, e2m1_value(uint8_t(b >> 4)) * s);
      }
    }
  }
}

}  // namespace

void v41_kv_load(V41KvFormat f, const uint8_t* src, int n, float* x) {
  if (f == V41KvFormat::kF32) {
    std::memcpy(x, src, size_t(n) * 4);
    return;
  }
  load_values(f, src, n, [x](int j, float v) { x[j] = v; });
}

void v41_kv_load_bf16(V41KvFormat f, const uint8_t* src, int n, uint16_t* x, int ld) {
  DI_CHECK(ld >= n);
  if (f == V41KvFormat::kF32) {
    for (int j = 0; j < n; ++j) {
      float v;
      std::memcpy(&v, src + size_t(j) * 4, 4);
      x[j] = f32_to_bf16(v);
    }
  } else {  // exact in bf16: its upper half, which rounding would give
    load_values(f, src, n, [x](int j, float v) {
      uint32_t u;
      std::memcpy(&u, &v, 4);
      x[j] = uint16_t(u >> 16);
    });
  }
  std::fill(x + n, x + ld, uint16_t(0));
}

void v41_fake_quant(V41KvFormat f, float* x, int n) {
  if (f == V41KvFormat::kF32) return;
  uint8_t buf[4096];
  DI_CHECK(v41_kv_bytes(f, n) <= sizeof buf);
  v41_kv_store(f, x, n, buf);
  v41_kv_load(f, buf, n, x);
}

}  // namespace deepinfer
