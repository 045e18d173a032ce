#include "model/forward_batch.h"

namespace deepinfer {

double kv_bytes_per_token(const std::vector<KvKindSpec>& kinds, int block_size) {
  double bytes = 0;
  for (const KvKindSpec& k : kinds) {
    if (k.lookback == 0) bytes += double(k.n_slabs) * double(k.bytes_per_block) / double(block_size);
  }
  return bytes;
}

size_t kv_bytes_per_sequence_window(const std::vector<KvKindSpec>& kinds, int block_size) {
  size_t bytes = 0;
  for (const KvKindSpec& k : kinds) {
    if (k.lookback > 0) {
      const size_t n_blocks = size_t((k.lookback + block_size - 1) / block_size) + 1;
      bytes += n_blocks * size_t(k.n_slabs) * k.bytes_per_block;
    }
  }
  return bytes;
}

}  // namespace deepinfer
