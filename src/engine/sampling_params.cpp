#include "engine/sampling_params.h"

#include <cmath>
#include <string>

namespace deepinfer {

namespace {
// `what` starts with the field's name.
Status bad(const std::string& what) {
  return Status::Error("invalid sampling parameter: " + what).with_field(what.substr(0, what.find(' ')));
}
bool in_vocab(int32_t id, int vocab_size) { return id >= 0 && id < vocab_size; }
}  // namespace

Status SamplingParams::validate(int vocab_size) const {
  if (n < 1) return bad("n must be at least 1, got " + std::to_string(n));
  if (!(temperature >= 0.0f) || !std::isfinite(temperature)) return bad("temperature must be >= 0");
  if (top_k < 0) return bad("top_k must be >= 0 (0: no limit), got " + std::to_string(top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) return bad("top_p must be in (0, 1]");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return bad("min_p must be in [0, 1]");
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty)) return bad("repetition_penalty must be > 0");
  if (!(std::fabs(presence_penalty) <= 2.0f)) return bad("presence_penalty must be in [-2, 2]");
  if (!(std::fabs(frequency_penalty) <= 2.0f)) return bad("frequency_penalty must be in [-2, 2]");
  for (const auto& [id, bias] : logit_bias) {
    if (!in_vocab(id, vocab_size)) return bad("logit_bias token id " + std::to_string(id) + " is not in the vocabulary");
    if (!(std::fabs(bias) <= 100.0f)) return bad("logit_bias values must be in [-100, 100]");
  }
  if (top_logprobs < 0 || top_logprobs > 20) return bad("top_logprobs must be in [0, 20]");
  for (int32_t id : stop_token_ids) {
    if (!in_vocab(id, vocab_size)) return bad("stop_token_ids holds " + std::to_string(id) + ", which is not in the vocabulary");
  }
  if (max_tokens < 0) return bad("max_tokens must be >= 1 (0: as many as fit)");
  if (min_tokens < 0 || (max_tokens > 0 && min_tokens > max_tokens)) return bad("min_tokens must be in [0, max_tokens]");
  if (constraint) {
    if (!constraint->masks) return bad("constraint has no grammar");
    if (constraint->masks->vocabulary().size() > size_t(vocab_size))
      return bad("constraint is over a vocabulary larger than the model's");
    if (constraint->start_after_token != -1 && !in_vocab(constraint->start_after_token, vocab_size))
      return bad("constraint starts after a token that is not in the vocabulary");
  }
  return Status::Ok();
}

}  // namespace deepinfer
