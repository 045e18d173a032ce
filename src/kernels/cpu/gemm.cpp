// Linear-layer drivers: check params, cut outputs into blocks, run blocks on OpenMP threads with
// the active ISA's kernels (kernel_table.h). A batch of m rows streams each weight block once.
#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/vec.h"
#include "kernels/cpu/work_split.h"

namespace deepinfer::cpu {
namespace {

void check_weight(const LinearWeight& w) {
  DI_CHECK(w.data != nullptr && w.n_out > 0 && w.n_in > 0);
  if (has_block_scales(w.dtype))
    DI_CHECK_MSG(w.scale_inv != nullptr && w.block_rows > 0 && w.block_cols % 16 == 0,
                 "fp8 and int8 weights need scale_inv and a block width that is a multiple of 16");
  DI_CHECK_MSG(w.act_dtype == DType::F32 || (w.act_dtype == DType::BF16 && admits_bf16_activations(w)),
               "bf16 activations need bf16 or FP4 weights, or fp8 or int8 weights with blocks of a multiple of 32 columns");
  DI_CHECK_MSG(!w.tile_major || (kernels().packs_tiles && runs_packed(w)),
               "tile-major weights run only on the packed blocks of a level that relays them");
}

}  // namespace

const uint16_t* const* bf16_rows(const float* const* x, int64_t m, int64_t n, Bf16Rows& buf) {
  buf.values.resize(size_t(m * n));
  buf.rows.resize(size_t(m));
  const KernelTable& k = kernels();
#pragma omp parallel for schedule(static) if (m * n >= (1 << 16))
  for (int64_t r = 0; r < m; ++r) k.round_to_bf16(x[r], buf.values.data() + r * n, n);
  for (int64_t r = 0; r < m; ++r) buf.rows[size_t(r)] = buf.values.data() + r * n;
  return buf.rows.data();
}

const uint16_t* packed_bf16_rows(const float* const* x, int64_t m, int64_t n, AlignedVector<uint16_t>& buf) {
  const KernelTable& k = kernels();
  const int64_t tile_elems = k.packed_elems(16, n);
  buf.resize(size_t(k.packed_elems(m, n)));
  uint16_t* out = buf.data();
#pragma omp parallel for schedule(static) if (m * n >= (1 << 16))
  for (int64_t t = 0; t < (m + 15) / 16; ++t) k.pack_bf16x(x + t * 16, std::min<int64_t>(16, m - t * 16), n, out + t * tile_elems);
  return out;
}

bool runs_packed(const LinearWeight& w) {
  const KernelTable& k = kernels();
  return w.act_dtype == DType::BF16 && k.packs != nullptr && k.packs(w);
}

int64_t packed_column_block(int64_t n_out, int64_t n_in, int64_t tile_row_bytes, int64_t row_bytes, int64_t m) {
  const KernelTable& k = kernels();
  if (!k.packs_tiles) return column_block(n_out, row_bytes);
  const bool streams = m * n_in * 2 > k.packed_pass_bytes;  // bf16 activations beyond one pass
  const int64_t bytes = m <= 16 ? 1 : tile_row_bytes;
  const int64_t nb = streams ? column_block(n_out, bytes, k.packed_panel_bytes) : column_block(n_out, bytes);
  const int64_t align = k.packed_block_align;
  return (nb + align - 1) / align * align;
}

namespace {
// A relaid weight (LinearWeight::tile_major): its 16 x 32 blocks, then its scales (fp8 and int8: a
// copy of the stored scales; FP4: the blocks' scale bytes; bf16: none), so that no read of it
// touches the stored weight's pages, nor maps their neighbours.
int64_t tile_blocks(const LinearWeight& w) { return (w.n_out + 15) / 16 * ((w.n_in + 31) / 32); }
size_t block_bytes(const LinearWeight& w) {
  return w.dtype == DType::BF16 ? 1024 : has_block_scales(w.dtype) ? 512 : 256;
}
size_t scale_bytes(const LinearWeight& w) {
  return w.dtype == DType::BF16 ? 0 : has_block_scales(w.dtype) ? weight_scale_bytes(w) : size_t(tile_blocks(w)) * 16;
}
}  // namespace

size_t relaid_bytes(const LinearWeight& w) {
  const KernelTable& k = kernels();
  const bool relays = has_block_scales(w.dtype) || w.dtype == DType::F4_E2M1 || (w.dtype == DType::BF16 && k.relays_bf16);
  if (!relays || w.tile_major || !k.packs_tiles || !runs_packed(w)) return 0;
  return size_t(tile_blocks(w)) * block_bytes(w) + scale_bytes(w);
}

LinearWeight relay_weight(const LinearWeight& w, void* out) {
  DI_CHECK_MSG(relaid_bytes(w) > 0, "relay_weight: the active level keeps this weight as stored");
  const int64_t kc = (w.n_in + 31) / 32, n_tiles = (w.n_out + 15) / 16;
  const bool codes = has_block_scales(w.dtype);  // byte codes (fp8 or int8); else bf16 values or FP4 nibbles
  const bool bf16 = w.dtype == DType::BF16;
  const int64_t row_bytes = weight_row_bytes(w), chunk_bytes = bf16 ? 64 : codes ? 32 : 16;  // of a row, per 32 columns
  const uint8_t* src = static_cast<const uint8_t*>(w.data);
  uint8_t* dst = static_cast<uint8_t*>(out);
  uint8_t* scales = dst + size_t(tile_blocks(w)) * block_bytes(w);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < n_tiles; ++t)
    for (int64_t c = 0; c < kc; ++c) {
      uint8_t* block = dst + (t * kc + c) * int64_t(block_bytes(w));
      if (bf16) {  // row r of the block at bytes 64r .. 64r + 63, as stored
        const int64_t n = std::min<int64_t>(chunk_bytes, row_bytes - c * chunk_bytes);
        for (int64_t r = 0; r < 16; ++r) {
          const int64_t row = t * 16 + r, copied = row < w.n_out ? n : 0;
          if (copied) std::memcpy(block + r * 64, src + row * row_bytes + c * chunk_bytes, size_t(copied));
          std::memset(block + r * 64 + copied, 0, size_t(64 - copied));
        }
        continue;
      }
      if (!codes) {  // FP4 (n_in % 32 == 0): word l of group g holds column l of rows 4g + j at bits 4j
        for (int64_t g = 0; g < 4; ++g) {
          const uint8_t* rows[4];
          for (int64_t j = 0; j < 4; ++j) {
            const int64_t row = t * 16 + 4 * g + j;
            rows[j] = row < w.n_out ? src + row * row_bytes + c * chunk_bytes : nullptr;
            scales[(t * kc + c) * 16 + 4 * g + j] = rows[j] ? w.scale_e8m0[row * (w.n_in / 32) + c] : 127;
          }
          for (int64_t h = 0; h < 2; ++h) {  // bytes 8h .. 8h + 7 of each row: columns 16h .. 16h + 15
            uint64_t v[4] = {};
            for (int64_t j = 0; j < 4; ++j)
              if (rows[j]) std::memcpy(&v[j], rows[j] + 8 * h, 8);
            const uint64_t lo = 0x0f0f0f0f0f0f0f0full;
            // byte k of out[i]: byte 4k + i of the group's half (columns 2k: rows 0-1, 2-3; 2k + 1: the same)
            const uint64_t out[4] = {(v[0] & lo) | (v[1] & lo) << 4, (v[2] & lo) | (v[3] & lo) << 4,
                                     (v[0] >> 4 & lo) | (v[1] & ~lo), (v[2] >> 4 & lo) | (v[3] & ~lo)};
            for (int64_t k = 0; k < 8; ++k)
              for (int64_t i = 0; i < 4; ++i) block[g * 64 + 32 * h + 4 * k + i] = uint8_t(out[i] >> (8 * k));
          }
        }
        continue;
      }
      const int64_t n = std::min<int64_t>(chunk_bytes, row_bytes - c * chunk_bytes);
      for (int64_t r = 0; r < 16; ++r) {  // pair order: columns 2p, 2p + 1 of row r at bytes 32p + 2r, 32p + 2r + 1
        const int64_t row = t * 16 + r;
        const int64_t copied = row < w.n_out ? n : 0;
        const uint8_t* s = src + row * row_bytes + c * chunk_bytes;
        if (copied == chunk_bytes) {
          for (int64_t p = 0; p < 16; ++p) std::memcpy(block + p * 32 + r * 2, s + 2 * p, 2);
          continue;
        }
        for (int64_t j = 0; j < chunk_bytes; ++j) block[j / 2 * 32 + r * 2 + j % 2] = j < copied ? s[j] : 0;
      }
    }
  if (codes) std::memcpy(scales, w.scale_inv, weight_scale_bytes(w));
  LinearWeight r = w;
  r.data = out;
  if (codes) r.scale_inv = reinterpret_cast<const float*>(scales);
  else if (!bf16) r.scale_e8m0 = scales;
  r.tile_major = true;
  return r;
}

void embed(const EmbedParams& p) {
  DI_CHECK(p.table != nullptr && p.ids != nullptr && p.y != nullptr);
  DI_CHECK_MSG(!p.table->tile_major, "an embedding table is read by rows, as stored");
  for (int64_t r = 0; r < p.m; ++r) {
    DI_CHECK(p.ids[r] >= 0 && p.ids[r] < p.table->n_out);
    dequant_row(*p.table, p.ids[r], p.y + r * p.table->n_in);
  }
}

void linear(const LinearParams& p) {
  if (p.m == 0) return;
  DI_CHECK(p.w != nullptr && p.x != nullptr && p.y != nullptr);
  DI_CHECK(p.ldx >= p.w->n_in && p.ldy >= p.w->n_out && p.m >= 0);
  check_weight(*p.w);
  const LinearWeight& w = *p.w;
  const KernelTable& k = kernels();
  const float* const* x = strided_rows(p.x, p.ldx, p.m);
  if (runs_packed(w)) {
    thread_local AlignedVector<uint16_t> packed_buf;
    const uint16_t* packed = packed_bf16_rows(x, p.m, w.n_in, packed_buf);
    const int64_t nb = packed_column_block(w.n_out, w.n_in, w.n_in * 2, weight_row_bytes(w), p.m);
    const int64_t n_blocks = (w.n_out + nb - 1) / nb;
#pragma omp parallel for schedule(static) if (n_blocks > 1)
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t o0 = b * nb, o1 = std::min(w.n_out, o0 + nb);
      k.linear_block_packed(packed, p.m, w, o0, o1, p.y + o0, p.ldy);
    }
    return;
  }
  thread_local Bf16Rows x_bf16;
  const uint16_t* const* xb = w.act_dtype == DType::BF16 ? bf16_rows(x, p.m, w.n_in, x_bf16) : nullptr;
  const int64_t nb = column_block(w.n_out, weight_row_bytes(w));
  const int64_t n_blocks = (w.n_out + nb - 1) / nb;
#pragma omp parallel for schedule(static) if (n_blocks > 1)
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t o0 = b * nb, o1 = std::min(w.n_out, o0 + nb);
    if (xb) k.linear_block_bf16x(xb, p.m, w, o0, o1, p.y + o0, p.ldy);
    else k.linear_block(x, p.m, w, o0, o1, p.y + o0, p.ldy);
  }
}

void swiglu(const SwigluParams& p) {
  if (p.m == 0) return;
  DI_CHECK(p.gate && p.up && p.x && p.y);
  const LinearWeight &g = *p.gate, &u = *p.up;
  check_weight(g);
  DI_CHECK(u.dtype == g.dtype && u.n_out == g.n_out && u.n_in == g.n_in && u.block_cols == g.block_cols &&
           u.act_dtype == g.act_dtype && u.tile_major == g.tile_major);
  DI_CHECK(p.ldx >= g.n_in && p.ldy >= g.n_out);
  const KernelTable& k = kernels();
  const float* const* x = strided_rows(p.x, p.ldx, p.m);
  if (runs_packed(g)) {
    thread_local AlignedVector<uint16_t> packed_buf;
    const uint16_t* packed = packed_bf16_rows(x, p.m, g.n_in, packed_buf);
    const int64_t nb = packed_column_block(g.n_out, g.n_in, 4 * g.n_in, 2 * weight_row_bytes(g), p.m);
    const int64_t n_blocks = (g.n_out + nb - 1) / nb;
#pragma omp parallel for schedule(static) if (n_blocks > 1)
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int64_t o0 = b * nb, o1 = std::min(g.n_out, o0 + nb);
      k.swiglu_block_packed(packed, p.m, g, u, o0, o1, p.y + o0, p.ldy);
    }
    return;
  }
  thread_local Bf16Rows x_bf16;
  const uint16_t* const* xb = g.act_dtype == DType::BF16 ? bf16_rows(x, p.m, g.n_in, x_bf16) : nullptr;
  const int64_t nb = column_block(g.n_out, 2 * weight_row_bytes(g));
  const int64_t n_blocks = (g.n_out + nb - 1) / nb;
#pragma omp parallel for schedule(static) if (n_blocks > 1)
  for (int64_t b = 0; b < n_blocks; ++b) {
    const int64_t o0 = b * nb, o1 = std::min(g.n_out, o0 + nb);
    if (xb) k.swiglu_block_bf16x(xb, p.m, g, u, o0, o1, p.y + o0, p.ldy);
    else k.swiglu_block(x, p.m, g, u, o0, o1, p.y + o0, p.ldy);
  }
}

void mla_absorb_query(const MlaAbsorbQueryParams& p) {
  DI_CHECK(p.w_kv_b != nullptr && p.q != nullptr && p.q_latent != nullptr);
  const LinearWeight& w = *p.w_kv_b;
  check_weight(w);
  DI_CHECK_MSG(w.act_dtype == DType::F32, "kv_b_proj runs with f32 activations");
  DI_CHECK(w.n_out == int64_t(p.n_heads) * (p.qk_nope_head_dim + p.v_head_dim));
  if (p.m == 0) return;
  const int64_t c = w.n_in, H = p.n_heads;
  constexpr int64_t kCols = 128;  // a multiple of 64, as outer_block wants
  const int64_t n_cb = (c + kCols - 1) / kCols;
  thread_local std::vector<const float*> rows;  // [H, m]: head h's nope part of row r
  rows.resize(size_t(H * p.m));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t r = 0; r < p.m; ++r) rows[size_t(h * p.m + r)] = p.q + r * p.ld_q + h * p.ld_q_head;
  const float* const* all_rows = rows.data();  // rows is per thread: pass the caller's on
  const KernelTable& k = kernels();
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < H * n_cb; ++t) {
    const int64_t h = t / n_cb, c0 = (t % n_cb) * kCols, c1 = std::min(c, c0 + kCols);
    k.outer_block(all_rows + h * p.m, p.m, p.qk_nope_head_dim, w, h * (p.qk_nope_head_dim + p.v_head_dim), c0, c1,
                  p.q_latent + h * c + c0, H * c);
  }
}

void mla_project_value(const MlaProjectValueParams& p) {
  DI_CHECK(p.w_kv_b != nullptr && p.o_latent != nullptr && p.out != nullptr);
  const LinearWeight& w = *p.w_kv_b;
  check_weight(w);
  DI_CHECK_MSG(w.act_dtype == DType::F32, "kv_b_proj runs with f32 activations");
  DI_CHECK(w.n_out == int64_t(p.n_heads) * (p.qk_nope_head_dim + p.v_head_dim));
  if (p.m == 0) return;
  const int64_t c = w.n_in, H = p.n_heads, v = p.v_head_dim;
  constexpr int64_t kOuts = 32;
  const int64_t n_ob = (v + kOuts - 1) / kOuts;
  thread_local std::vector<const float*> rows;  // [H, m]: head h's latent output of row r
  rows.resize(size_t(H * p.m));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t r = 0; r < p.m; ++r) rows[size_t(h * p.m + r)] = p.o_latent + (r * H + h) * c;
  const float* const* all_rows = rows.data();  // rows is per thread: pass the caller's on
  const KernelTable& k = kernels();
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < H * n_ob; ++t) {
    const int64_t h = t / n_ob, j0 = (t % n_ob) * kOuts, j1 = std::min(v, j0 + kOuts);
    const int64_t row0 = h * (p.qk_nope_head_dim + v) + p.qk_nope_head_dim;
    k.linear_block(all_rows + h * p.m, p.m, w, row0 + j0, row0 + j1, p.out + h * v + j0, H * v);
  }
}

}  // namespace deepinfer::cpu
