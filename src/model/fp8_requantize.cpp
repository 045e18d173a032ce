#include "model/fp8_requantize.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "model/weight_pages.h"

namespace deepinfer {
namespace {

// Row r of w in f32 (exact for every stored dtype).
void row_f32(const LinearWeight& w, int64_t r, float* out) {
  const int64_t n = w.n_in;
  if (w.dtype == DType::F32) {
    std::copy_n(static_cast<const float*>(w.data) + r * n, n, out);
    return;
  }
  const uint16_t* src = static_cast<const uint16_t*>(w.data) + r * n;
  if (w.dtype == DType::BF16)
    for (int64_t j = 0; j < n; ++j) out[j] = bf16_to_f32(src[j]);
  else
    for (int64_t j = 0; j < n; ++j) out[j] = f16_to_f32(src[j]);
}

// w's blocks of block_rows x block_cols as `to` codes written into `out` (resized: the codes
// [n_out, n_in], then the scales from a cache line): scale = the block's largest |W| / max_code (1
// for a block of zeros), code = encode(W / scale). An error names the first block row holding a
// NaN or an infinity, which no scale keeps the block's other values for; `what` names the format.
template <class Encode>
Result<LinearWeight> requantize_blocks(const LinearWeight& w, AlignedVector<uint8_t>& out, DType to, int64_t block_rows,
                                       int64_t block_cols, float max_code, Encode encode, const char* what) {
  DI_CHECK_MSG(requantizes_to_fp8(w) && w.data != nullptr, "requantization takes stored bf16, f16 or f32 weights");
  const int64_t n_out = w.n_out, n_in = w.n_in, R = block_rows, C = block_cols;
  const int64_t row_blocks = (n_out + R - 1) / R, col_blocks = (n_in + C - 1) / C;
  const size_t code_bytes = (size_t(n_out) * size_t(n_in) + 63) / 64 * 64;
  out.resize(code_bytes + size_t(row_blocks * col_blocks) * sizeof(float));
  uint8_t* codes = out.data();
  float* scales = reinterpret_cast<float*>(out.data() + code_bytes);
  int64_t bad_row = n_out;  // the first row of the first block row holding a NaN or an infinity
#pragma omp parallel
  {
    std::vector<float> rows(static_cast<size_t>(R * n_in));  // one block row in f32
#pragma omp for schedule(dynamic, 16)
    for (int64_t rb = 0; rb < row_blocks; ++rb) {
      const int64_t r0 = rb * R, nr = std::min(R, n_out - r0);
      for (int64_t i = 0; i < nr; ++i) row_f32(w, r0 + i, rows.data() + i * n_in);
      for (int64_t cb = 0; cb < col_blocks; ++cb) {
        const int64_t c0 = cb * C, c1 = std::min(n_in, c0 + C);
        float amax = 0.0f;
        bool finite = true;
        for (int64_t i = 0; i < nr; ++i)
          for (int64_t j = c0; j < c1; ++j) {
            const float a = std::fabs(rows[size_t(i * n_in + j)]);
            finite = finite && a <= std::numeric_limits<float>::max();  // false for NaN too
            amax = std::max(amax, a);
          }
        if (!finite) {
#pragma omp critical(requantize_bad_row)
          bad_row = std::min(bad_row, r0);
          break;
        }
        const float s = amax > 0.0f ? amax / max_code : 1.0f;
        scales[rb * col_blocks + cb] = s;
        for (int64_t i = 0; i < nr; ++i)
          for (int64_t j = c0; j < c1; ++j) codes[(r0 + i) * n_in + j] = encode(rows[size_t(i * n_in + j)] / s);
      }
    }
  }
  if (bad_row < n_out) {
    const int64_t last = std::min(n_out, bad_row + R) - 1;
    return Status::Error("holds a NaN or an infinity in " +
                         (last > bad_row ? "rows " + std::to_string(bad_row) + ".." + std::to_string(last)
                                         : "row " + std::to_string(bad_row)) +
                         ", which " + what + " cannot scale");
  }
  LinearWeight q = w;
  q.dtype = to;
  q.data = codes;
  q.scale_inv = scales;
  q.block_rows = int(R);
  q.block_cols = int(C);
  q.scale_e8m0 = nullptr;
  return q;
}

}  // namespace

Result<LinearWeight> requantize_fp8(const LinearWeight& w, AlignedVector<uint8_t>& out) {
  return requantize_blocks(w, out, DType::F8_E4M3, kRequantBlock, kRequantBlock, 448.0f, f32_to_fp8_e4m3, "fp8");
}

Result<LinearWeight> requantize_int8(const LinearWeight& w, AlignedVector<uint8_t>& out) {
  return requantize_blocks(w, out, DType::I8_SM, 1, kInt8BlockCols, 127.0f, f32_to_int8_sm, "int8");
}

Result<bool> requantize_lm_head(LinearWeight& head, DType to, bool tied, const std::string& model_dir,
                                const std::string& name, AlignedVector<uint8_t>& store) {
  DI_CHECK_MSG(to == DType::F8_E4M3 || to == DType::I8_SM, "an lm_head is requantized to fp8 or int8");
  if (!requantizes_to_fp8(head)) return false;
  const bool int8 = to == DType::I8_SM;
  Result<LinearWeight> q = int8 ? requantize_int8(head, store) : requantize_fp8(head, store);
  if (!q.ok())
    return Status::Error(model_dir + ": tensor '" + name + "' (the lm_head, asked in " + (int8 ? "int8" : "fp8") + ") " +
                         q.status().message());
  if (!tied) release_pages(head);
  head = *q;
  return true;
}

}  // namespace deepinfer
