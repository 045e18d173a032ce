#include "engine/engine_options.h"

#include <fstream>
#include <sstream>
#include <string>

namespace deepinfer {

namespace {

// MemAvailable from /proc/meminfo, in bytes.
Result<size_t> available_memory() {
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream ss(line);
    std::string key;
    size_t kib = 0;
    if (ss >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return Status::Error("cannot read MemAvailable from /proc/meminfo; give --kv-cache-memory in bytes");
}

}  // namespace

Status EngineOptions::validate() const {
  if (block_size < 1 || block_size > 4096) return Status::Error("block size must be in [1, 4096]");
  if (max_num_batched_tokens < 1) return Status::Error("max-num-batched-tokens must be at least 1");
  if (max_num_seqs < 1) return Status::Error("max-num-seqs must be at least 1");
  if (kv_cache_memory_bytes == 0 && !(kv_cache_memory_fraction > 0.0 && kv_cache_memory_fraction <= 1.0)) {
    return Status::Error("kv-cache-memory-fraction must be in (0, 1]");
  }
  if (kv_cache_dtype != DType::BF16 && kv_cache_dtype != DType::F8_E4M3 && kv_cache_dtype != DType::F32) {
    return Status::Error("kv-cache-dtype must be bf16, fp8 or f32");
  }
  if (max_model_len < 0) return Status::Error("max-model-len must be >= 0 (0: the model's limit)");
  if (num_speculative_tokens < 1 || num_speculative_tokens > kMaxSpeculativeTokens)
    return Status::Error("num-speculative-tokens must be in [1, " + std::to_string(kMaxSpeculativeTokens) + "]");
  DI_RETURN_IF_ERROR(speculative_gate.validate());
  return Status::Ok();
}

Result<size_t> EngineOptions::kv_cache_budget() const {
  if (kv_cache_memory_bytes > 0) return kv_cache_memory_bytes;
  DI_ASSIGN_OR_RETURN(const size_t available, available_memory());
  return size_t(double(available) * kv_cache_memory_fraction);
}

}  // namespace deepinfer
