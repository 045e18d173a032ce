#include "grammar/token_vocabulary.h"

#include <algorithm>
#include <numeric>

#include "core/check.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::grammar {
namespace {

// The bytes a byte-level token stands for, or false when some character is not in the alphabet.
bool byte_level_bytes(const std::string& token, std::string& out) {
  out.clear();
  for (size_t i = 0; i < token.size();) {
    const uint8_t b = uint8_t(token[i]);
    const int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    if (i + size_t(n) > token.size()) return false;
    char32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k < n; ++k) c = (c << 6) | (uint8_t(token[i + size_t(k)]) & 0x3F);
    const int byte = byte_level::byte_for_char(c);
    if (byte < 0) return false;
    out += char(byte);
    i += size_t(n);
  }
  return true;
}

}  // namespace

TokenVocabulary::TokenVocabulary(std::vector<std::string> token_bytes, std::vector<int32_t> end_ids)
    : bytes_(std::move(token_bytes)), end_ids_(std::move(end_ids)) {
  for (int32_t id : end_ids_) DI_CHECK(id >= 0 && size_t(id) < bytes_.size());
  std::vector<int32_t> order;
  for (size_t id = 0; id < bytes_.size(); ++id) {
    if (!bytes_[id].empty() && !is_end(int32_t(id))) order.push_back(int32_t(id));
    max_token_bytes_ = std::max(max_token_bytes_, bytes_[id].size());
  }
  DI_CHECK(max_token_bytes_ < 65535);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return bytes_[size_t(a)] < bytes_[size_t(b)]; });
  // Preorder construction from the sorted tokens: `open` holds the node of each depth on the path
  // of the previous token.
  std::vector<uint32_t> open;
  std::vector<uint32_t> parent;  // per node; UINT32_MAX for a first byte
  const std::string* prev = nullptr;
  for (int32_t id : order) {
    const std::string& t = bytes_[size_t(id)];
    size_t common = 0;
    if (prev) {
      while (common < prev->size() && common < t.size() && (*prev)[common] == t[common]) ++common;
    }
    while (open.size() > common) {
      trie_[open.back()].subtree_end = uint32_t(trie_.size());
      open.pop_back();
    }
    for (size_t d = common; d < t.size(); ++d) {
      parent.push_back(open.empty() ? UINT32_MAX : open.back());
      open.push_back(uint32_t(trie_.size()));
      trie_.push_back({uint8_t(t[d]), uint16_t(d + 1), 0, uint32_t(node_tokens_.size()), 0});
    }
    TrieNode& last = trie_[open.back()];
    if (last.n_tokens == 0) last.first_token = uint32_t(node_tokens_.size());
    node_tokens_.push_back(id);
    ++last.n_tokens;
    prev = &t;
  }
  while (!open.empty()) {
    trie_[open.back()].subtree_end = uint32_t(trie_.size());
    open.pop_back();
  }
  subtree_bytes_.resize(trie_.size());
  for (size_t i = trie_.size(); i-- > 0;) {
    subtree_bytes_[i].add(trie_[i].byte);
    if (parent[i] != UINT32_MAX) subtree_bytes_[parent[i]] |= subtree_bytes_[i];
  }
}

bool TokenVocabulary::is_end(int32_t id) const {
  return std::find(end_ids_.begin(), end_ids_.end(), id) != end_ids_.end();
}

Result<TokenVocabulary> TokenVocabulary::FromTokenizer(const Tokenizer& tokenizer) {
  std::vector<std::string> bytes(tokenizer.vocab_size());
  std::string mapped;
  for (size_t id = 0; id < bytes.size(); ++id) {
    if (tokenizer.is_special_id(int32_t(id))) continue;
    std::optional<std::string> token = tokenizer.id_to_token(int32_t(id));
    if (!token) continue;
    if (byte_level_bytes(*token, mapped)) {
      bytes[id] = mapped;
      continue;
    }
    const int32_t one[1] = {int32_t(id)};
    auto text = tokenizer.decode(one, false);
    if (!text.ok()) return Status::Error("token " + std::to_string(id) + ": " + text.status().message());
    bytes[id] = std::move(*text);
  }
  std::vector<int32_t> end_ids;
  for (int32_t id : tokenizer.eos_token_ids()) {
    if (id >= 0 && size_t(id) < bytes.size()) end_ids.push_back(id);
  }
  return TokenVocabulary(std::move(bytes), std::move(end_ids));
}

}  // namespace deepinfer::grammar
