// The prefix-affinity key of an OpenAI request body: a 64-bit hash (xxHash) of the leading
// `n_bytes` of its prompt, so that requests sharing a long enough prefix (a system prompt, a
// conversation so far) get the same key and land on the same prefill worker, whose prefix
// cache then holds it.
//   chat:        the compact JSON of `messages` (as sent: key order kept)
//   completions: `prompt` as a string; a list of strings: its first; token ids: their JSON
// A body with neither field hashes the empty string (the worker then answers its 400).
#pragma once

#include <cstddef>
#include <cstdint>

#include <nlohmann/json.hpp>

namespace deepinfer::router {

inline constexpr size_t kDefaultAffinityBytes = 512;

uint64_t affinity_key(const nlohmann::ordered_json& body, size_t n_bytes = kDefaultAffinityBytes);

}  // namespace deepinfer::router
