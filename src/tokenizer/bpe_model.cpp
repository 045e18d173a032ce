#include "tokenizer/bpe_model.h"

#include <atomic>
#include <queue>

#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

using json_fields::json;

constexpr size_t kCacheMaxPieceBytes = 256;
constexpr size_t kCacheMaxEntries = 1 << 17;
// Words up to this many symbols merge by rescanning; longer ones use a priority queue.
constexpr size_t kSmallWord = 48;

std::atomic<uint64_t> next_cache_tag{1};

// Per-thread cache of piece -> ids for one model at a time (the last one used on the thread).
struct WordCache {
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  uint64_t tag = 0;
  std::unordered_map<std::string, std::pair<uint32_t, uint32_t>, Hash, std::equal_to<>> index;
  std::vector<int32_t> ids;  // entries' ids, back to back
  void reset(uint64_t new_tag) {
    tag = new_tag;
    index.clear();
    ids.clear();
  }
};

WordCache& word_cache() {
  thread_local WordCache cache;
  return cache;
}

}  // namespace

void BpeModel::MergeTable::build(const std::vector<std::pair<uint64_t, uint64_t>>& entries) {
  size_t capacity = 16;
  while (capacity < entries.size() * 2) capacity *= 2;
  slots_.assign(capacity, Slot{kEmpty, kNone});
  mask_ = capacity - 1;
  shift_ = 64 - __builtin_ctzll(capacity);
  for (const auto& [key, value] : entries) {
    size_t i = slot(key);
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
    slots_[i] = {key, value};  // a repeated pair keeps its last rank, as in the library
  }
}

Result<BpeModel> BpeModel::FromJson(const json& config) {
  const std::string where = "model";
  if (!config.is_object()) return Status::Error("model: expected an object");
  // Files from old library versions have no "type"; their BPE models are known by "merges".
  const std::string type = config.contains("type") && config["type"].is_string()
                               ? config["type"].get<std::string>()
                               : (config.contains("merges") ? "BPE" : "unknown");
  if (type != "BPE") return Status::Error("model type '" + type + "' is not supported (only BPE)");
  BpeModel m;
  if (auto it = config.find("dropout"); it != config.end() && !it->is_null() &&
                                        !(it->is_number() && it->get<double>() == 0.0)) {
    return Status::Error("model: BPE dropout is not supported (tokenization must be deterministic)");
  }
  auto vocab = config.find("vocab");
  if (vocab == config.end() || !vocab->is_object()) return json_fields::missing(where, "vocab", "an object");
  m.vocab_.reserve(vocab->size());
  int32_t max_id = -1;
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it->is_number_unsigned() || it->get<uint64_t>() > uint64_t(INT32_MAX)) {
      return Status::Error("model.vocab: id of '" + it.key() + "' is not a valid token id");
    }
    const auto id = static_cast<int32_t>(it->get<uint64_t>());
    m.vocab_[it.key()] = id;
    max_id = std::max(max_id, id);
  }
  m.tokens_.assign(size_t(max_id + 1), std::string());
  m.has_id_.assign(size_t(max_id + 1), false);
  for (const auto& [token, id] : m.vocab_) {
    m.tokens_[size_t(id)] = token;
    m.has_id_[size_t(id)] = true;
  }

  auto optional_string = [&](const char* key, std::string& out) -> Status {
    auto it = config.find(key);
    if (it == config.end() || it->is_null()) return Status::Ok();
    if (!it->is_string()) return json_fields::missing(where, key, "a string or null");
    out = it->get<std::string>();
    return Status::Ok();
  };
  DI_RETURN_IF_ERROR(optional_string("continuing_subword_prefix", m.prefix_));
  DI_RETURN_IF_ERROR(optional_string("end_of_word_suffix", m.suffix_));
  std::string unk;
  DI_RETURN_IF_ERROR(optional_string("unk_token", unk));
  if (config.contains("unk_token") && config["unk_token"].is_string()) {
    auto id = m.token_to_id(unk);
    if (!id) return Status::Error("model: unk_token '" + unk + "' is not in the vocabulary");
    m.unk_id_ = *id;
  }
  DI_ASSIGN_OR_RETURN(m.fuse_unk_, json_fields::get_bool(config, "fuse_unk", false, where));
  DI_ASSIGN_OR_RETURN(m.byte_fallback_, json_fields::get_bool(config, "byte_fallback", false, where));
  DI_ASSIGN_OR_RETURN(m.ignore_merges_, json_fields::get_bool(config, "ignore_merges", false, where));

  // Merges: "a b" strings (the older format) or ["a", "b"] pairs.
  auto merges = config.find("merges");
  if (merges == config.end() || !merges->is_array()) return json_fields::missing(where, "merges", "a list");
  std::vector<std::pair<uint64_t, uint64_t>> entries;
  entries.reserve(merges->size());
  uint32_t rank = 0;
  std::string left, right;
  for (const json& merge : *merges) {
    if (merge.is_string()) {
      const std::string& line = merge.get_ref<const std::string&>();
      if (line.starts_with("#version")) continue;
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        return Status::Error("model.merges[" + std::to_string(rank) + "]: '" + line +
                             "' is not two tokens separated by one space");
      }
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>();
      right = merge[1].get<std::string>();
    } else {
      return Status::Error("model.merges[" + std::to_string(rank) + "]: expected \"a b\" or [\"a\", \"b\"]");
    }
    auto a = m.token_to_id(left), b = m.token_to_id(right);
    if (!a || !b) {
      return Status::Error("model.merges[" + std::to_string(rank) + "]: token '" + (a ? right : left) +
                           "' is not in the vocabulary");
    }
    // The merged token drops the right side's first prefix-length bytes, as the library does.
    if (m.prefix_.size() > right.size()) {
      return Status::Error("model.merges[" + std::to_string(rank) + "]: '" + right +
                           "' is shorter than continuing_subword_prefix");
    }
    auto merged = m.token_to_id(left + right.substr(m.prefix_.size()));
    if (!merged) {
      return Status::Error("model.merges[" + std::to_string(rank) + "]: merged token '" + left +
                           right.substr(m.prefix_.size()) + "' is not in the vocabulary");
    }
    entries.emplace_back((uint64_t(uint32_t(*a)) << 32) | uint32_t(*b),
                         (uint64_t(rank) << 32) | uint32_t(*merged));
    ++rank;
  }
  m.merges_.build(entries);

  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    m.byte_fallback_ids_[size_t(b)] = m.token_to_id(name).value_or(-1);
    m.byte_char_ids_[size_t(b)] = m.token_to_id(byte_level::char_for_byte(uint8_t(b))).value_or(-1);
  }
  m.byte_fast_path_ = m.prefix_.empty() && m.suffix_.empty();
  if (m.byte_fast_path_ && m.ignore_merges_) {
    for (const auto& [token, id] : m.vocab_) {
      std::string bytes;
      bool all_mapped = true;
      for (size_t i = 0; i < token.size() && all_mapped;) {
        const int b = byte_level::byte_for_char(utf8::next_code_point(token, i));
        all_mapped = b >= 0;
        bytes.push_back(static_cast<char>(b));
      }
      if (all_mapped) m.byte_vocab_.emplace(std::move(bytes), id);
    }
  }
  m.cache_tag_ = next_cache_tag.fetch_add(1);
  return m;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || size_t(id) >= tokens_.size() || !has_id_[size_t(id)]) return nullptr;
  return &tokens_[size_t(id)];
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& symbols) const {
  bool unk_pending = false;
  std::string key;
  for (size_t i = 0; i < word.size();) {
    const size_t start = i;
    i += utf8::char_length(static_cast<uint8_t>(word[i]));
    std::string_view s = word.substr(start, i - start);
    const bool first = start == 0, last = i == word.size();
    if ((!first && !prefix_.empty()) || (last && !suffix_.empty())) {
      key.assign(first ? "" : prefix_);
      key += s;
      if (last) key += suffix_;
      s = key;
    }
    if (auto it = vocab_.find(s); it != vocab_.end()) {
      if (unk_pending) symbols.push_back(*unk_id_), unk_pending = false;
      symbols.push_back(it->second);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      for (char b : s) all = all && byte_fallback_ids_[static_cast<uint8_t>(b)] >= 0;
      if (all) {
        for (char b : s) symbols.push_back(byte_fallback_ids_[static_cast<uint8_t>(b)]);
        continue;
      }
    }
    if (unk_id_) {
      if (unk_pending && !fuse_unk_) symbols.push_back(*unk_id_);
      unk_pending = true;
    }
  }
  if (unk_pending) symbols.push_back(*unk_id_);
}

void BpeModel::merge(std::vector<int32_t>& symbols) const {
  const size_t n = symbols.size();
  if (n < 2) return;
  if (n <= kSmallWord) {
    // Rescan: merge the lowest-rank adjacent pair, leftmost on ties, until none is left.
    // A packed value rank<<32|id orders by rank; equal ranks are the same merge.
    uint64_t pair_value[kSmallWord];
    size_t count = n;
    for (size_t i = 0; i + 1 < count; ++i) pair_value[i] = merges_.find(symbols[i], symbols[i + 1]);
    while (count > 1) {
      size_t best = 0;
      for (size_t i = 1; i + 1 < count; ++i) {
        if (pair_value[i] < pair_value[best]) best = i;
      }
      if (pair_value[best] == MergeTable::kNone) break;
      symbols[best] = static_cast<int32_t>(pair_value[best] & 0xFFFFFFFFu);
      for (size_t i = best + 1; i + 1 < count; ++i) symbols[i] = symbols[i + 1];
      for (size_t i = best + 1; i + 2 < count; ++i) pair_value[i] = pair_value[i + 1];
      --count;
      if (best > 0) pair_value[best - 1] = merges_.find(symbols[best - 1], symbols[best]);
      if (best + 1 < count) pair_value[best] = merges_.find(symbols[best], symbols[best + 1]);
    }
    symbols.resize(count);
    return;
  }
  // Long words: a priority queue of candidate merges over a linked list of symbols; an entry is
  // applied only if the same pair of tokens is still there (the library checks that the pair
  // still yields the same token, which only the same pair does).
  struct Candidate {
    uint32_t rank;
    uint32_t pos;
    int32_t id;
    int32_t left, right;
    bool operator<(const Candidate& o) const {  // top = lowest rank, then leftmost
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::vector<int32_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  std::vector<Candidate> storage;
  storage.reserve(n);
  std::priority_queue<Candidate> queue(std::less<Candidate>(), std::move(storage));
  for (size_t i = 0; i < n; ++i) {
    prev[i] = int32_t(i) - 1;
    next[i] = i + 1 < n ? int32_t(i + 1) : -1;
    if (i + 1 < n) {
      const uint64_t v = merges_.find(symbols[i], symbols[i + 1]);
      if (v != MergeTable::kNone) {
        queue.push({uint32_t(v >> 32), uint32_t(i), int32_t(v & 0xFFFFFFFFu), symbols[i], symbols[i + 1]});
      }
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    if (!alive[top.pos] || next[top.pos] < 0) continue;
    const auto right = size_t(next[top.pos]);
    if (symbols[top.pos] != top.left || symbols[right] != top.right) continue;
    symbols[top.pos] = top.id;
    alive[right] = false;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[size_t(next[right])] = int32_t(top.pos);
    if (prev[top.pos] >= 0) {
      const auto left = size_t(prev[top.pos]);
      const uint64_t w = merges_.find(symbols[left], symbols[top.pos]);
      if (w != MergeTable::kNone) {
        queue.push({uint32_t(w >> 32), uint32_t(left), int32_t(w & 0xFFFFFFFFu), symbols[left], symbols[top.pos]});
      }
    }
    if (next[top.pos] >= 0) {
      const int32_t after = symbols[size_t(next[top.pos])];
      const uint64_t w = merges_.find(symbols[top.pos], after);
      if (w != MergeTable::kNone) {
        queue.push({uint32_t(w >> 32), uint32_t(top.pos), int32_t(w & 0xFFFFFFFFu), symbols[top.pos], after});
      }
    }
  }
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    if (alive[i]) symbols[count++] = symbols[i];
  }
  symbols.resize(count);
}

void BpeModel::tokenize_uncached(std::string_view piece, bool byte_level,
                                 std::vector<int32_t>& out) const {
  const size_t first = out.size();
  bool mapped_all = byte_level;
  if (byte_level) {
    for (char b : piece) {
      const int32_t id = byte_char_ids_[static_cast<uint8_t>(b)];
      mapped_all = mapped_all && id >= 0;
      out.push_back(id);
    }
  }
  if (!mapped_all) {
    // A byte whose character is not in the vocabulary goes through byte_fallback/unk handling.
    out.resize(first);
    if (byte_level) {
      std::string mapped;
      byte_level::append_mapped(mapped, piece);
      initial_symbols(mapped, out);
    } else {
      initial_symbols(piece, out);
    }
  }
  thread_local std::vector<int32_t> symbols;
  symbols.assign(out.begin() + std::ptrdiff_t(first), out.end());
  merge(symbols);
  out.resize(first);
  out.insert(out.end(), symbols.begin(), symbols.end());
}

void BpeModel::tokenize(std::string_view piece, bool byte_level, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (byte_level && !byte_fast_path_) {
    std::string mapped;
    byte_level::append_mapped(mapped, piece);
    tokenize(mapped, false, out);
    return;
  }
  if (ignore_merges_) {
    const Vocab& whole = byte_level ? byte_vocab_ : vocab_;
    if (auto it = whole.find(piece); it != whole.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (piece.size() >= kCacheMaxPieceBytes) {
    tokenize_uncached(piece, byte_level, out);
    return;
  }
  WordCache& cache = word_cache();
  const uint64_t tag = cache_tag_ * 2 + (byte_level ? 1 : 0);
  if (cache.tag != tag) cache.reset(tag);
  if (auto it = cache.index.find(piece); it != cache.index.end()) {
    const auto [offset, length] = it->second;
    out.insert(out.end(), cache.ids.begin() + offset, cache.ids.begin() + offset + length);
    return;
  }
  const size_t first = out.size();
  tokenize_uncached(piece, byte_level, out);
  if (cache.index.size() >= kCacheMaxEntries) cache.reset(tag);
  cache.index.emplace(std::string(piece),
                      std::pair<uint32_t, uint32_t>(uint32_t(cache.ids.size()), uint32_t(out.size() - first)));
  cache.ids.insert(cache.ids.end(), out.begin() + std::ptrdiff_t(first), out.end());
}

}  // namespace deepinfer
