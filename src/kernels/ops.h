// The compute seam: plain-data params structs, every field with its shape, and the Backend
// that executes them. Model code calls the backend at fused-op granularity; each op validates
// its params once at entry (DI_CHECK) and its kernels trust them.
//
// All activations are f32. Weights stay in their stored dtype and are dequantized inside the
// kernels. A bf16 weight may ask for its input activations rounded to bf16 first
// (LinearWeight::act_dtype), which is opt-in and trades accuracy for arithmetic rate. Batch invariance: every output row is computed by a fixed sequence of operations
// that depends only on that row's inputs, never on the number of rows or the thread count.
#pragma once

#include <cstdint>
#include <cstring>

#include "core/dtype.h"
#include "model/forward_batch.h"

namespace deepinfer {

// A linear layer's weight W: [n_out, n_in], row-major, in stored precision; y = x W^T.
struct LinearWeight {
  DType dtype = DType::BF16;        // F32, F16, BF16, F8_E4M3, I8_SM or F4_E2M1
  const void* data = nullptr;       // [n_out, n_in], aligned to the element size; F4_E2M1: [n_out, n_in / 2] bytes
  int64_t n_out = 0;
  int64_t n_in = 0;
  // F8_E4M3 and I8_SM (byte codes, has_block_scales): [ceil(n_out / block_rows), ceil(n_in / block_cols)];
  // W[i, j] = value(code[i, j]) * scale_inv[i / block_rows, j / block_cols].
  const float* scale_inv = nullptr;
  int block_rows = 128;
  int block_cols = 128;
  // F32, or BF16 (bf16 and FP4 weights, and fp8 and int8 weights whose block_cols is a multiple of
  // 32; see admits_bf16_activations): linear, swiglu and moe round each input activation to bf16
  // (nearest even) before its products with this weight; on CPUs with AVX-512 BF16 the products
  // then run as bf16 dot products, twice the f32 FMA rate (fp8 and int8 weights: converted to bf16
  // exactly, each block's partial dot product scaled). Per element and per row, so batch
  // invariance holds.
  DType act_dtype = DType::F32;
  // F4_E2M1 only (n_in a multiple of 32): [n_out, n_in / 32] UE8M0 bytes, none 0xff;
  // W[i, j] = E2M1(nibble j of row i) * 2^(scale_e8m0[i, j / 32] - 127), exact in bf16 and f32.
  const uint8_t* scale_e8m0 = nullptr;
  // F8_E4M3, I8_SM, F4_E2M1 and BF16: the weights stored tile-major instead of by rows
  // (Backend::relay_weight; only the CPU levels whose packed blocks run on weight tiles read this
  // layout: amx, and avx512bf16 for fp8 and int8). Block b = t * kc +
  // c (kc = ceil(n_in / 32)) holds the 16 x 32 weights of rows [16t, 16t + 16) and columns
  // [32c, 32c + 32): bf16 1 KiB at data + 1024 b, row 16t + r at bytes 64r .. 64r + 63 (the tiles' A
  // operand), zero past n_out and n_in; fp8 and int8 512 code bytes at data + 512 b in pair order (columns 32c + 2p and
  // 32c + 2p + 1 of row 16t + r at bytes 32p + 2r and 32p + 2r + 1: the tiles' B operand), zero past
  // n_out and n_in (scale_inv: a copy of the stored scales, after the blocks); FP4 256 bytes of
  // nibbles at data + 256 b, four 64-byte groups of 4 rows (16-bit word l of group g holds column
  // 32c + l of row 16t + 4g + j in bits 4j .. 4j + 3), the 16 rows' scale bytes at scale_e8m0 + 16 b
  // (after the blocks), zero nibbles past n_out. The same values as stored, so every output keeps
  // its bits.
  bool tile_major = false;
  // F8_E4M3 with every scale_inv a power of two 2^k, -117 <= k <= 119 (UE8M0 scales, as DeepSeek-V4
  // publishes them), block_rows a multiple of 16 and block_cols of 32 (pow2_block_scales), under
  // bf16 activations: set by the loaders that opt in (DeepSeek-V4's and V4.1's). The amx level then
  // folds each block's scale into its weights (every e4m3 value times 2^k is a normal bf16 value, so
  // they stay exact) and sums each output's products over all of n_in in one chain instead of
  // scaling each block's partial sum; a SwiGLU's gate and up fold only together. Other levels
  // ignore it.
  bool scales_fold = false;
};

// Bytes of one row of w.data: n_in elements of w.dtype, two to a byte for F4_E2M1 (scales apart).
inline int64_t weight_row_bytes(const LinearWeight& w) {
  return w.dtype == DType::F4_E2M1 ? w.n_in / 2 : w.n_in * int64_t(dtype_size(w.dtype));
}
// Bytes of w.data.
inline size_t weight_data_bytes(const LinearWeight& w) { return size_t(w.n_out) * size_t(weight_row_bytes(w)); }
// Whether weights of dtype t are one code byte each with f32 block scales (scale_inv).
constexpr bool has_block_scales(DType t) { return t == DType::F8_E4M3 || t == DType::I8_SM; }

// Bytes of w's scales: F8_E4M3's and I8_SM's scale_inv floats, F4_E2M1's scale_e8m0 bytes; 0 for the rest.
inline size_t weight_scale_bytes(const LinearWeight& w) {
  if (has_block_scales(w.dtype))
    return size_t((w.n_out + w.block_rows - 1) / w.block_rows) * size_t((w.n_in + w.block_cols - 1) / w.block_cols) *
           sizeof(float);
  return w.dtype == DType::F4_E2M1 ? size_t(w.n_out) * size_t(w.n_in / 32) : 0;
}

// Whether `w` may take act_dtype BF16.
inline bool admits_bf16_activations(const LinearWeight& w) {
  return w.dtype == DType::BF16 || w.dtype == DType::F4_E2M1 || (has_block_scales(w.dtype) && w.block_cols % 32 == 0);
}

// Whether w qualifies for scales_fold (its dtype, blocks and every scale).
inline bool pow2_block_scales(const LinearWeight& w) {
  if (w.dtype != DType::F8_E4M3 || w.scale_inv == nullptr || w.block_rows % 16 != 0 || w.block_cols % 32 != 0)
    return false;
  const int64_t n = (w.n_out + w.block_rows - 1) / w.block_rows * ((w.n_in + w.block_cols - 1) / w.block_cols);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t b;
    std::memcpy(&b, w.scale_inv + i, 4);
    const uint32_t e = b >> 23;  // sign clear: the biased exponent
    if ((b & 0x7fffffu) != 0 || e < 127 - 117 || e > 127 + 119) return false;
  }
  return true;
}

// Under bf16 activations (ModelOptions::activation_dtype): act_dtype BF16 where w admits it, and
// scales_fold where its scales qualify (pow2_block_scales). Weights without data stay as they are.
inline void use_bf16_activations(LinearWeight& w) {
  if (!w.data || !admits_bf16_activations(w)) return;
  w.act_dtype = DType::BF16;
  w.scales_fold = pow2_block_scales(w);
}

struct LinearParams {
  const float* x = nullptr;   // [m, ldx], the first w->n_in columns used
  int64_t ldx = 0;
  int64_t m = 0;
  const LinearWeight* w = nullptr;
  float* y = nullptr;         // [m, ldy], columns [0, w->n_out) written
  int64_t ldy = 0;
};

struct RmsNormParams {
  const float* x = nullptr;     // [m, ldx], first n columns
  int64_t ldx = 0;
  float* y = nullptr;           // [m, ldy], may alias x when ldy == ldx
  int64_t ldy = 0;
  int64_t m = 0;
  int64_t n = 0;
  const float* weight = nullptr;  // [n]
  float eps = 1e-6f;
};

// Rotates interleaved pairs (x[2i], x[2i+1]) by angle position * inv_freq[i], in place, as
// DeepSeek's reference (complex multiplication), then scales by `scale` (YaRN's cos/sin mscale).
struct RopeParams {
  float* x = nullptr;           // row r, head h: x + r * ld_row + h * ld_head, rope_dim values
  int64_t ld_row = 0;
  int64_t ld_head = 0;
  int64_t m = 0;
  int n_heads = 1;
  int rope_dim = 0;
  const int32_t* positions = nullptr;  // [m]
  const float* inv_freq = nullptr;     // [rope_dim / 2]
  float scale = 1.0f;
};

// Writes each row's normalized latent and roped key part into the paged cache at its position.
struct MlaKvStoreParams {
  const float* latent = nullptr;  // [n_rows, ld_latent], first kv_lora_rank columns
  int64_t ld_latent = 0;
  const float* k_pe = nullptr;    // [n_rows, ld_k_pe], first qk_rope_head_dim columns
  int64_t ld_k_pe = 0;
  const ForwardBatch* batch = nullptr;  // rows, positions and block tables
  uint8_t* cache = nullptr;       // one layer: [num_blocks, block_size, layout.bytes_per_token()]
  MlaCacheLayout layout;
  int block_size = 0;
  int kind = 0;                   // which of each sequence's block tables indexes `cache`
};

// q_latent[r, h, :] = sum_d q_nope[r, h, d] * W[h * (qk_nope + v) + d, :]   (W = kv_b_proj)
struct MlaAbsorbQueryParams {
  const float* q = nullptr;        // [m, ld_q]; head h's nope part at h * ld_q_head
  int64_t ld_q = 0;
  int64_t ld_q_head = 0;
  int64_t m = 0;
  const LinearWeight* w_kv_b = nullptr;  // [n_heads * (qk_nope + v_head_dim), kv_lora_rank]
  int n_heads = 0;
  int qk_nope_head_dim = 0;
  int v_head_dim = 0;
  float* q_latent = nullptr;       // [m, n_heads, kv_lora_rank]
};

// out[r, h * v + j] = sum_c o_latent[r, h, c] * W[h * (qk_nope + v) + qk_nope + j, c]
struct MlaProjectValueParams {
  const float* o_latent = nullptr;  // [m, n_heads, kv_lora_rank]
  int64_t m = 0;
  const LinearWeight* w_kv_b = nullptr;
  int n_heads = 0;
  int qk_nope_head_dim = 0;
  int v_head_dim = 0;
  float* out = nullptr;             // [m, n_heads * v_head_dim]
};

// Absorbed MLA attention of every batch row over its sequence's cached positions [0, position]:
// score[t] = (q_latent . latent[t] + q_pe . k_pe[t]) * softmax_scale; out = softmax(score) @ latent.
struct MlaAttentionParams {
  const float* q_latent = nullptr;  // [n_rows, n_heads, kv_lora_rank]
  const float* q_pe = nullptr;      // row r, head h: q_pe + r * ld_q_pe_row + h * ld_q_pe_head, rope dim
  int64_t ld_q_pe_row = 0;
  int64_t ld_q_pe_head = 0;
  float* out_latent = nullptr;      // [n_rows, n_heads, kv_lora_rank]
  int n_heads = 0;
  float softmax_scale = 1.0f;
  const ForwardBatch* batch = nullptr;
  const uint8_t* cache = nullptr;   // one layer: [num_blocks, block_size, layout.bytes_per_token()]
  MlaCacheLayout layout;
  int block_size = 0;
  int kind = 0;                     // which of each sequence's block tables indexes `cache`
  // F32, or BF16 (bf16 or fp8 cache): each head's [q_latent | q_pe] is rounded to bf16 and the
  // scores are bf16 dot products with the cached keys as stored; the softmax weights are rounded
  // to bf16 for the value sum (bf16 products, f32 accumulation) while the running sums take them
  // unrounded, as MlaExpandedAttentionParams' BF16 does. An fp8 cache is read as the bf16 cache
  // holding each latent dequantized and rounded to bf16 (bf16 of the f32 product code * scale),
  // bit for bit.
  DType dot_dtype = DType::F32;
};

// Expanded MLA attention (the prefill formulation, CausalLM's provenance rule) of every batch row
// over its sequence's cached positions [0, position]. Each cached latent c[t] is expanded by
// kv_b_proj (W) to per-head keys and values:
//   k_nope[t, h, d] = W[h * (qk_nope + v) + d] . c[t],   v[t, h, j] = W[h * (qk_nope + v) + qk_nope + j] . c[t];
//   score[t, h] = (q_nope[h] . k_nope[t, h] + q_pe[h] . k_pe[t]) * softmax_scale;
//   out[h] = softmax(score[., h]) @ v[., h].
// A position's K/V is a function of its latent alone (one GEMM per block of positions through the
// batch-invariant linear kernels), and each row reduces over absolute key blocks in a fixed order,
// so a row's output does not depend on the other rows, on its sequence's chunking or on threads.
struct MlaExpandedAttentionParams {
  const float* q = nullptr;  // row r, head h: q + r * ld_q + h * ld_q_head: [qk_nope_head_dim | qk_rope_head_dim roped]
  int64_t ld_q = 0;
  int64_t ld_q_head = 0;
  float* out = nullptr;      // [n_rows, ld_out]: head h's values at columns [h * v_head_dim, (h + 1) * v_head_dim)
  int64_t ld_out = 0;
  const LinearWeight* w_kv_b = nullptr;  // [n_heads * (qk_nope + v_head_dim), kv_lora_rank]
  int n_heads = 0;
  int qk_nope_head_dim = 0;
  int v_head_dim = 0;
  float softmax_scale = 1.0f;
  const ForwardBatch* batch = nullptr;  // every row is computed (the caller picks the prompt rows)
  const uint8_t* cache = nullptr;  // one layer: [num_blocks, block_size, layout.bytes_per_token()]
  MlaCacheLayout layout;
  int block_size = 0;
  int kind = 0;                    // which of each sequence's block tables indexes `cache`
  // F32: every product in f32 (latents widened). BF16 (bf16 or fp8 cache): the cached latents
  // multiply kv_b_proj as stored (an fp8 cache's dequantized to f32 and so rounded to bf16, as
  // MlaAttentionParams' BF16 reads them; bf16 activations, where admits_bf16_activations(*w_kv_b)),
  // queries, expanded keys and values and the softmax weights are rounded to bf16, and both the
  // scores and the value sums are bf16 dot products (f32 accumulation).
  DType dot_dtype = DType::F32;
};

// Attention with sinks over one shared K=V head (DeepSeek-V4's sliding window plus compressed
// entries, also V4.1's and the MTP block's): for each query head h,
//   out_h = sum_t e^(s_t) k_t / (sum_t e^(s_t) + e^(sink_h)),  s_t = q_h . k_t * scale,
// over the keys the caller gathered. Per head, its output depends only on its query, the keys, its
// sink and the scale (not on the threads, nor on whether the call runs inside a parallel region).
struct SinkAttentionParams {
  const float* q = nullptr;     // [n_heads, dim]
  const float* keys = nullptr;  // [n_keys, dim], also the values
  const float* sink = nullptr;  // [n_heads]
  float* out = nullptr;         // [n_heads, dim]
  int n_heads = 0;
  int dim = 0;
  int n_keys = 0;               // >= 1
  float scale = 1.0f;
  // F32: every product in f32. BF16 (bf16 activations): the queries and the keys are rounded to
  // bf16 (nearest even; V4.1's cache formats and a bf16 cache's entries are exact in bf16) and the
  // scores are bf16 dot products with f32 sums; each weight e^(s_t - mx) / (sum + e^(sink - mx)),
  // computed in f32, is rounded to bf16 for the value sums, again bf16 products with f32 sums. On
  // AMX tiles an element below 2^-126 (subnormal) counts as zero, as TDPBF16PS reads it.
  DType dot_dtype = DType::F32;
  // BF16 dots only, instead of keys: the keys already rounded, [ceil(n_keys / 16) * 16][keys_bf16_ld]
  // bf16 (keys_bf16_ld a multiple of 32, >= dim), zero past n_keys and dim: what rounding `keys`
  // would give, bit for bit, without the f32 copy.
  const uint16_t* keys_bf16 = nullptr;
  int64_t keys_bf16_ld = 0;
};

// The lightning indexer's scores in bf16 products (DeepSeek-V4 under bf16 activations over a bf16
// or fp8 cache; V4.1's e2m1 keys and queries, exact in bf16): every key's score
//   scores[e] = sum_h head_weights[h] * relu(q_h . key_e),
// the query rounded to bf16 (nearest even) and the keys' codes as stored, each exact in bf16, so the
// products are exact and only the f32 sums round (over each head's dimensions, then over the
// heads; an fp8 key's dot products times its scale, one more rounding). A key's score depends only on the query, the weights and that key: not on the other
// keys, the threads, nor on whether the call runs inside a parallel region. On AMX tiles a query
// element or key value below 2^-126 (subnormal) counts as zero, as TDPBF16PS reads it.
struct IndexerScoresParams {
  const float* q = nullptr;             // [n_heads, dim]
  const float* head_weights = nullptr;  // [n_heads]
  // [n_keys] rows, where they lie (e.g. in the cache): key_dtype BF16, dim bf16 elements; F4_E2M1
  // (dim a multiple of 32), dim / 2 bytes of e2m1 nibbles (even element in the low nibble) then
  // dim / 32 UE8M0 scale bytes, element j = E2M1(nibble j) * 2^(scale[j / 32] - 127); F8_E4M3
  // (dim <= 128), dim e4m3 codes then one f32 scale s (unaligned), element j = e4m3(code j) * s.
  const void* const* keys = nullptr;
  DType key_dtype = DType::BF16;
  float* scores = nullptr;              // [n_keys]
  int n_heads = 0;
  int dim = 0;
  int64_t n_keys = 0;
};

// y[r, i] = silu(x[r] . gate[i]) * (x[r] . up[i]) for i < gate->n_out: the input half of a
// SwiGLU MLP in one pass over x, without the [m, 2 * inter] intermediate.
struct SwigluParams {
  const float* x = nullptr;           // [m, ldx], the first gate->n_in columns used
  int64_t ldx = 0;
  int64_t m = 0;
  const LinearWeight* gate = nullptr; // [inter, n_in]
  const LinearWeight* up = nullptr;   // [inter, n_in], same dtype and shape as gate
  float* y = nullptr;                 // [m, ldy], columns [0, inter) written
  int64_t ldy = 0;
};

// One SwiGLU MLP: down(silu(gate(x)) * up(x)).
struct MlpWeightRefs {
  const LinearWeight* gate = nullptr;  // [inter, hidden]
  const LinearWeight* up = nullptr;    // [inter, hidden]
  const LinearWeight* down = nullptr;  // [hidden, inter]
};

// A routed MoE layer with optional shared experts:
//   y[r] = (sum over the row's experts e in increasing id of weight(r, e) * expert_e(x[r])) + shared(x[r]).
// Rows are grouped by expert so each active expert streams its weights once per call.
struct MoeParams {
  const float* x = nullptr;            // [m, ldx], the first hidden columns used
  int64_t ldx = 0;
  int64_t m = 0;
  const MlpWeightRefs* experts = nullptr;  // [n_experts] routed experts, all of one shape
  int n_experts = 0;
  int top_k = 0;
  const int32_t* expert_ids = nullptr;     // [m, top_k], distinct per row, each < n_experts
  const float* expert_weights = nullptr;   // [m, top_k]
  const MlpWeightRefs* shared = nullptr;   // the shared experts as one MLP, or nullptr
  float* y = nullptr;                      // [m, ldy], the first hidden columns written
  int64_t ldy = 0;
};

// y[r, :] = row ids[r] of the table, as f32 (embedding lookup).
struct EmbedParams {
  const LinearWeight* table = nullptr;  // [vocab, hidden]
  const int32_t* ids = nullptr;         // [m], each < table->n_out
  int64_t m = 0;
  float* y = nullptr;                   // [m, table->n_in]
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual void embed(const EmbedParams& p) = 0;
  virtual void linear(const LinearParams& p) = 0;
  virtual void rms_norm(const RmsNormParams& p) = 0;
  virtual void rope(const RopeParams& p) = 0;
  virtual void mla_kv_store(const MlaKvStoreParams& p) = 0;
  virtual void mla_absorb_query(const MlaAbsorbQueryParams& p) = 0;
  virtual void mla_project_value(const MlaProjectValueParams& p) = 0;
  virtual void mla_attention(const MlaAttentionParams& p) = 0;
  virtual void mla_expanded_attention(const MlaExpandedAttentionParams& p) = 0;
  virtual void sink_attention(const SinkAttentionParams& p) = 0;
  virtual void indexer_scores(const IndexerScoresParams& p) = 0;
  virtual void swiglu(const SwigluParams& p) = 0;
  virtual void moe(const MoeParams& p) = 0;
  // Bytes of a layout of w that this backend reads faster than the stored one (bf16, fp8 and FP4
  // weights tile-major where they run on AMX tiles, fp8 where they run on AVX-512 BF16's pair
  // tiles), or 0: w stays as stored.
  virtual size_t relaid_bytes(const LinearWeight& w) = 0;
  // Writes that layout into out (relaid_bytes(w) bytes, 64-byte aligned; every byte written, so out
  // may start uninitialized) and returns w reading from it: the same values, every output bit for
  // bit as from w.
  virtual LinearWeight relay_weight(const LinearWeight& w, void* out) = 0;
};

// The CPU backend (kernels/cpu/), the reference that runs everywhere.
Backend& cpu_backend();

}  // namespace deepinfer
