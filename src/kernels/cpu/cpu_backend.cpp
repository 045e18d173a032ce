// The CPU Backend: forwards each op to its kernel family.
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/mla_attention.h"
#include "kernels/cpu/mla_expanded_attention.h"
#include "kernels/cpu/moe.h"
#include "kernels/cpu/norm_rope.h"
#include "kernels/cpu/indexer_scores.h"
#include "kernels/cpu/sink_attention.h"

namespace deepinfer {
namespace {

class CpuBackend final : public Backend {
 public:
  void embed(const EmbedParams& p) override { cpu::embed(p); }
  void linear(const LinearParams& p) override { cpu::linear(p); }
  void rms_norm(const RmsNormParams& p) override { cpu::rms_norm(p); }
  void rope(const RopeParams& p) override { cpu::rope(p); }
  void mla_kv_store(const MlaKvStoreParams& p) override { cpu::mla_kv_store(p); }
  void mla_absorb_query(const MlaAbsorbQueryParams& p) override { cpu::mla_absorb_query(p); }
  void mla_project_value(const MlaProjectValueParams& p) override { cpu::mla_project_value(p); }
  void mla_attention(const MlaAttentionParams& p) override { cpu::mla_attention(p); }
  void mla_expanded_attention(const MlaExpandedAttentionParams& p) override { cpu::mla_expanded_attention(p); }
  void sink_attention(const SinkAttentionParams& p) override { cpu::sink_attention(p); }
  void indexer_scores(const IndexerScoresParams& p) override { cpu::indexer_scores(p); }
  void swiglu(const SwigluParams& p) override { cpu::swiglu(p); }
  void moe(const MoeParams& p) override { cpu::moe(p); }
  size_t relaid_bytes(const LinearWeight& w) override { return cpu::relaid_bytes(w); }
  LinearWeight relay_weight(const LinearWeight& w, void* out) override { return cpu::relay_weight(w, out); }
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

}  // namespace deepinfer
