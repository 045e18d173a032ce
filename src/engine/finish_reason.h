// FinishReason: why a sequence stopped producing tokens.
#pragma once

#include <cstdint>
#include <string_view>

namespace deepinfer {

enum class FinishReason : uint8_t {
  kNone,    // not finished
  kStop,    // sampled an eos token (unless ignore_eos) or one of stop_token_ids
  kLength,  // reached max_tokens or the engine's max_model_len
  kAbort,   // aborted by its client
  kError,   // the engine stopped before the sequence finished
};

// OpenAI spelling: "stop", "length", "abort", "error"; "" for kNone.
inline std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
    case FinishReason::kError: return "error";
    case FinishReason::kNone: break;
  }
  return "";
}

}  // namespace deepinfer
