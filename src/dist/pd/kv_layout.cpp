#include "dist/pd/kv_layout.h"

namespace deepinfer::pd {

KvLayout kv_layout_of(const CausalLMInfo& model, const KvCacheInfo& cache) {
  KvLayout l;
  l.model = model.architecture + " vocab " + std::to_string(model.vocab_size) + " layers " + std::to_string(model.n_layers) +
            " params " + std::to_string(model.n_params) + " activations " +
            std::string(dtype_name(model.activation_dtype)) +
            (model.kv_formulation.empty() ? std::string() : ", " + model.kv_formulation);
  l.dtype = uint8_t(cache.dtype);
  l.block_size = uint32_t(cache.block_size);
  for (const KvKindInfo& k : cache.kinds)
    l.kinds.push_back({uint32_t(k.spec.n_slabs), uint64_t(k.spec.bytes_per_block), uint32_t(k.spec.lookback), uint32_t(k.n_blocks)});
  return l;
}

}  // namespace deepinfer::pd
