// BpeModel: the "model" of tokenizer.json when its type is BPE. Turns one pre-tokenized piece into
// token ids exactly as the library's BPE does: each character is looked up (with
// continuing_subword_prefix on all but the first and end_of_word_suffix on the last), unknown
// characters go to byte_fallback tokens <0xXX> or to unk_token (fused when fuse_unk) or are
// dropped; then the pair with the lowest merge rank is merged, leftmost first, until none is left.
// With ignore_merges a piece that is itself a vocabulary entry becomes that one token.
//
// Results for pieces shorter than 256 bytes are kept in a per-thread cache.
// Immutable after construction; tokenize() is thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"

namespace deepinfer {

class BpeModel {
 public:
  // `config` is the "model" value of tokenizer.json.
  static Result<BpeModel> FromJson(const nlohmann::json& config);

  // Appends the ids of `piece` (valid UTF-8, or raw bytes when `byte_level`: each byte then
  // stands for its byte-level alphabet character, see byte_level.h).
  void tokenize(std::string_view piece, bool byte_level, std::vector<int32_t>& out) const;

  // Number of vocabulary entries.
  size_t size() const { return vocab_.size(); }
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token of `id`, or nullptr when no entry has that id.
  const std::string* id_to_token(int32_t id) const;

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Vocab = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

  // Open-addressing map from a pair of ids to (rank, merged id).
  class MergeTable {
   public:
    void build(const std::vector<std::pair<uint64_t, uint64_t>>& entries);  // (key, rank<<32|id)
    // Returns rank<<32 | new_id, or kNone.
    uint64_t find(int32_t left, int32_t right) const {
      const uint64_t key = pack(left, right);
      for (size_t i = slot(key);; i = (i + 1) & mask_) {
        if (slots_[i].key == key) return slots_[i].value;
        if (slots_[i].key == kEmpty) return kNone;
      }
    }
    static constexpr uint64_t kNone = ~uint64_t{0};

   private:
    static uint64_t pack(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
    size_t slot(uint64_t key) const { return (key * 0x9E3779B97F4A7C15ull) >> shift_; }
    static constexpr uint64_t kEmpty = ~uint64_t{0};
    struct Slot {  // key and value side by side: one cache line per probe
      uint64_t key;
      uint64_t value;
    };
    std::vector<Slot> slots_;
    size_t mask_ = 0;
    int shift_ = 64;
  };

  // Initial symbols of a piece (before merging), appended to `symbols`.
  void initial_symbols(std::string_view word, std::vector<int32_t>& symbols) const;
  // Merges `symbols` in place by rank.
  void merge(std::vector<int32_t>& symbols) const;
  void tokenize_uncached(std::string_view piece, bool byte_level, std::vector<int32_t>& out) const;

  Vocab vocab_;
  std::vector<std::string> tokens_;  // by id; empty string where no entry has the id
  std::vector<bool> has_id_;
  MergeTable merges_;
  std::string prefix_, suffix_;  // continuing_subword_prefix, end_of_word_suffix ("" when unset)
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::array<int32_t, 256> byte_fallback_ids_{};  // id of "<0xXX>", or -1
  // Byte-level fast path (no prefix or suffix): id of each byte's alphabet character, or -1 when
  // the vocabulary lacks it (such pieces take the general path).
  std::array<int32_t, 256> byte_char_ids_{};
  bool byte_fast_path_ = false;
  Vocab byte_vocab_;        // ignore_merges with byte-level pieces: raw bytes -> id
  uint64_t cache_tag_ = 0;  // identifies this model's entries in the per-thread cache
};

}  // namespace deepinfer
