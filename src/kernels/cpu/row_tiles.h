// How the GEMM kernels cut m activation rows into register tiles: tiles of 6 rows, and a last 7
// or 8 rows as two tiles of 3-4 rather than 6 + 1-2 (a tile of 1-2 rows has too few independent
// accumulators to hide the multiply-add latency). Rows are independent in a tile, so the cut
// changes no result, only speed.
#pragma once

#include <cstdint>

namespace deepinfer::cpu {

// tile.template operator()<MR>(r) for each tile of MR rows starting at row r, rows [0, m).
template <class Tile>
__attribute__((always_inline)) inline void for_row_tiles(int64_t m, Tile&& tile) {
  int64_t r = 0;
  for (; m - r >= 9 || m - r == 6; r += 6) tile.template operator()<6>(r);
  if (m - r >= 7) {
    tile.template operator()<4>(r);
    r += 4;
  }
  switch (m - r) {
    case 5: tile.template operator()<5>(r); break;
    case 4: tile.template operator()<4>(r); break;
    case 3: tile.template operator()<3>(r); break;
    case 2: tile.template operator()<2>(r); break;
    case 1: tile.template operator()<1>(r); break;
    default: break;
  }
}

}  // namespace deepinfer::cpu
