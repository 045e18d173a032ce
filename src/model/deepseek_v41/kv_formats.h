// The KV formats DeepSeek-V4.1 was trained for (its QAT fake-quant, modeling_deepseek_v41.py at
// 0a2080b4, M:359-399), applied after RMSNorm and RoPE to whole vectors in blocks of consecutive
// channels; a stored value dequantizes to exactly the reference's fake-quantized value.
//   window KV (fp8)     per 32: e4m3fn(clamp(x / s, +-448)) RNE, s = 2^ceil(log2(max(amax, 1e-4) / 448))
//                       stored as [n] e4m3 then [n / 32] ue8m0 exponents: 528 B at width 512
//   compressed KV (fp4) per 16: s = e4m3fn RNE of max(amax, 6 * 2^-9) / 6, e2m1(clamp(x / s, +-6))
//                       stored as [n / 2] packed e2m1 (even element in the low nibble) then
//                       [n / 16] e4m3 scales: 288 B at width 512
//   indexer keys and queries (fp4) per 32: s = 2^ceil(log2(max(amax, 6 * 2^-126) * f32(1 / 6))),
//                       e2m1(clamp(x / s, +-6)); keys stored as [n / 2] e2m1 then [n / 32] ue8m0: 68 B at 128
// e2m1 rounds to nearest, ties to the even code (grid 0, .5, 1, 1.5, 2, 3, 4, 6).
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepinfer {

enum class V41KvFormat { kF32, kFp8Block32, kFp4E4m3Block16, kFp4Ue8m0Block32 };

inline constexpr int kV41KvBlock[] = {1, 32, 16, 32};  // channels per scale, by format

// Bytes of one stored vector of n channels (n a multiple of the format's block).
size_t v41_kv_bytes(V41KvFormat f, int n);
void v41_kv_store(V41KvFormat f, const float* x, int n, uint8_t* dst);
void v41_kv_load(V41KvFormat f, const uint8_t* src, int n, float* x);
// The loaded values rounded to bf16 (nearest even), then zeros up to x[ld) (ld >= n). The fp8 and
// fp4 formats' values are normal floats with at most 6 significant bits (their scales' floors keep
// them above 2^-32), exact in bf16: these are v41_kv_load's values.
void v41_kv_load_bf16(V41KvFormat f, const uint8_t* src, int n, uint16_t* x, int ld);
// x [n] replaced by its fake-quantized value (the indexer queries, which are not stored).
void v41_fake_quant(V41KvFormat f, float* x, int n);

}  // namespace deepinfer
