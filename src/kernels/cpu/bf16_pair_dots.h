// Where V multiplies bf16 pairs (VDPBF16PS), a specialization (bf16_pair_dots_avx512_bf16.h) sets
// kEnabled and provides, for the absorbed and the expanded MLA attention:
//  - scores(): 4 rows' bf16 query pairs against a block's keys packed
//    [kAttendKeyBlock / 16][n_pairs][16][2]: s[i][t] = scale * sum_u pair dot, u in order;
//  - accumulate(): o[i][0, n_cols) = o[i] * alpha[i] + sum over pairs u < n_pairs, in order, of
//    (p[i][2u] v[2u] + p[i][2u+1] v[2u+1]) for rows i < n_hb, from values laid out as
//    [n_pairs][ld_pair] pairs (ld_pair in bf16 elements; column c at 2c, 2c + 1);
//  - interleave(): one such pair row from two row-major value rows.
// Elsewhere kEnabled is false and the attention multiplies bf16-rounded operands in f32.
#pragma once

namespace deepinfer::cpu {
namespace {

template <class V>
struct Bf16PairDots {
  static constexpr bool kEnabled = false;
};

}  // namespace
}  // namespace deepinfer::cpu
