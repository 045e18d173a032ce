// Quantizing a weight stored in bf16, f16 or f32 to fp8 e4m3 with 128 x 128 block scales at load
// (or to int8 with a scale per row and 128 columns, requantize_int8):
// the layout DeepSeek's fp8 checkpoints give their linear layers (LinearWeight F8_E4M3 with f32
// scale_inv), so every kernel that runs those runs it, at one byte per weight instead of two.
//
// Per block B of 128 rows x 128 columns (the last ones partial): s = max |W| over B / 448 (1 for a
// block of zeros), code = e4m3(W / s) rounded to nearest even, and the kernels multiply with
// W' = value(code) * s. Rounding: a quotient of magnitude >= 2^-6 (a normal code) keeps 4
// significant bits, so |W' - W| <= 2^-4 |W|; below, codes step by 2^-9, so |W' - W| <= 2^-10 s;
// the f32 division and product add at most 2^-22 |W|.
#pragma once

#include <cstdint>
#include <string>

#include "core/aligned_vector.h"
#include "core/status.h"
#include "kernels/ops.h"

namespace deepinfer {

constexpr int kRequantBlock = 128;  // rows and columns per scale block

// w (BF16, F16 or F32, row-major, not tile-major) as F8_E4M3 with kRequantBlock blocks, its codes
// [n_out, n_in] then its scales written into `out` (resized); the result points into `out` and has
// w's act_dtype. An error where w holds a NaN or an infinity (no scale keeps the block's other
// values); the caller names the tensor. Any other dtype is a precondition failure (the caller checks).
Result<LinearWeight> requantize_fp8(const LinearWeight& w, AlignedVector<uint8_t>& out);

// Whether requantize_fp8 and requantize_int8 take w's dtype.
inline bool requantizes_to_fp8(const LinearWeight& w) {
  return !w.tile_major && (w.dtype == DType::BF16 || w.dtype == DType::F16 || w.dtype == DType::F32);
}

// Quantizing such a weight to int8 instead, as I8_SM codes with a scale per row and kInt8BlockCols
// columns (LinearWeight block_rows 1): s = max |W| over the block / 127 (1 for a block of zeros),
// code = W / s rounded to the nearest integer (ties to even), and the kernels multiply with
// W' = code * s, so |W' - W| <= s / 2 (plus 2^-23 |W| from the f32 division and product). A scale
// per row and 128 columns keeps the relative RMS error near that of ggml's Q8_0 (int8 per 32
// values; bench/RESULTS.md), at 8.25 bits per weight.
constexpr int kInt8BlockCols = 128;
Result<LinearWeight> requantize_int8(const LinearWeight& w, AlignedVector<uint8_t>& out);

// ModelOptions::lm_head_dtype for a model's lm_head: where requantizes_to_fp8, `head` becomes its
// form in `to` (F8_E4M3: requantize_fp8; I8_SM: requantize_int8) in `store` and its stored pages
// are dropped (not when `tied`: the embedding reads them), and the result is true; else (stored
// fp8 or FP4) it stays, false. Errors name the tensor `name` of the checkpoint in `model_dir`.
Result<bool> requantize_lm_head(LinearWeight& head, DType to, bool tied, const std::string& model_dir,
                                const std::string& name, AlignedVector<uint8_t>& store);

}  // namespace deepinfer
