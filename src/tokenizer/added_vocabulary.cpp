#include "tokenizer/added_vocabulary.h"

#include "tokenizer/json_fields.h"
#include "tokenizer/unicode_tables.h"
#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

using json_fields::json;


}  // namespace

void AddedVocabulary::Trie::add(std::string_view key, int32_t id) {
  if (key.empty()) return;
  uint32_t node = 0;
  for (char c : key) {
    const auto b = static_cast<uint8_t>(c);
    auto it = nodes_[node].children.find(b);
    if (it == nodes_[node].children.end()) {
      nodes_.emplace_back();
      it = nodes_[node].children.emplace(b, uint32_t(nodes_.size() - 1)).first;
    }
    node = it->second;
  }
  // The first pattern with a given content wins, like the library's automaton.
  if (nodes_[node].id < 0) nodes_[node].id = id;
  first_bytes_[static_cast<uint8_t>(key[0])] = true;
}

std::pair<size_t, int32_t> AddedVocabulary::Trie::longest_at(std::string_view text, size_t pos) const {
  std::pair<size_t, int32_t> best{0, -1};
  uint32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = nodes_[node].children.find(static_cast<uint8_t>(text[i]));
    if (it == nodes_[node].children.end()) break;
    node = it->second;
    if (nodes_[node].id >= 0) best = {i + 1 - pos, nodes_[node].id};
  }
  return best;
}

Result<AddedVocabulary> AddedVocabulary::FromJson(const json& config, const BpeModel& model,
                                                  const Normalizer& normalizer) {
  AddedVocabulary v;
  if (config.is_null()) return v;
  if (!config.is_array()) return Status::Error("added_tokens must be a list");
  std::vector<AddedToken> listed;
  for (size_t i = 0; i < config.size(); ++i) {
    const json& t = config[i];
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    if (!t.is_object()) return Status::Error(where + ": expected an object");
    AddedToken token;
    DI_ASSIGN_OR_RETURN(token.content, json_fields::get_string(t, "content", where));
    DI_ASSIGN_OR_RETURN(token.special, json_fields::get_bool(t, "special", false, where));
    DI_ASSIGN_OR_RETURN(token.single_word, json_fields::get_bool(t, "single_word", false, where));
    DI_ASSIGN_OR_RETURN(token.lstrip, json_fields::get_bool(t, "lstrip", false, where));
    DI_ASSIGN_OR_RETURN(token.rstrip, json_fields::get_bool(t, "rstrip", false, where));
    DI_ASSIGN_OR_RETURN(token.normalized, json_fields::get_bool(t, "normalized", !token.special, where));
    if (utf8::find_invalid(token.content) != std::string_view::npos) {
      return Status::Error(where + ": content is not valid UTF-8");
    }
    listed.push_back(std::move(token));
  }

  // The library's add_tokens: specials are registered first (by content), then ids are given in
  // order; the id stored in the file is not consulted.
  std::vector<const AddedToken*> special_patterns, plain_patterns;
  for (const AddedToken& t : listed) {
    if (t.special && !t.content.empty() && v.special_contents_.insert(t.content).second) {
      special_patterns.push_back(&t);
    }
  }
  const auto model_size = static_cast<int64_t>(model.size());
  int64_t max_added = -1;
  auto same = [](const AddedToken& a, const AddedToken& b) {
    return a.content == b.content && a.special == b.special && a.single_word == b.single_word &&
           a.lstrip == b.lstrip && a.rstrip == b.rstrip && a.normalized == b.normalized;
  };
  for (const AddedToken& t : listed) {
    if (t.content.empty()) continue;
    bool duplicate = false;
    for (const AddedToken& existing : v.tokens_) duplicate = duplicate || same(existing, t);
    if (duplicate) continue;
    int64_t id;
    if (auto it = v.id_by_content_.find(t.content); it != v.id_by_content_.end()) {
      id = it->second;
    } else if (auto model_id = model.token_to_id(t.content)) {
      id = *model_id;
    } else if (max_added < 0) {
      id = model_size;
    } else {
      id = (max_added >= model_size || model_size == 0) ? max_added + 1 : model_size;
    }
    if (id > INT32_MAX) return Status::Error("added token '" + t.content + "' gets an id beyond int32");
    max_added = std::max(max_added, id);
    AddedToken stored = t;
    stored.id = static_cast<int32_t>(id);
    v.id_by_content_[t.content] = stored.id;
    if (auto it = v.index_by_id_.find(stored.id); it != v.index_by_id_.end()) {
      v.tokens_[it->second] = stored;
    } else {
      v.index_by_id_[stored.id] = v.tokens_.size();
      v.tokens_.push_back(stored);
    }
    if (!v.special_contents_.contains(t.content)) plain_patterns.push_back(&t);
  }

  for (const auto* list : {&special_patterns, &plain_patterns}) {
    for (const AddedToken* t : *list) {
      const int32_t id = v.id_by_content_.at(t->content);
      if (!t->normalized) {
        v.raw_trie_.add(t->content, id);
        continue;
      }
      std::string content = t->content;
      DI_RETURN_IF_ERROR(normalizer.apply(content));
      v.normalized_trie_.add(content, id);
    }
  }
  return v;
}

void AddedVocabulary::split(std::string_view text, bool normalized, std::vector<Segment>& out) const {
  const Trie& trie = normalized ? normalized_trie_ : raw_trie_;
  if (trie.empty() || text.empty()) {
    out.push_back({0, text.size(), -1});
    return;
  }
  // The library tests \w (the regex crate's) on the characters beside the token.
  auto is_word_char = [&](size_t at) {
    return unicode::contains(unicode::rust_word_chars(), utf8::next_code_point(text, at));
  };
  size_t start_offset = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    if (!trie.may_start(static_cast<uint8_t>(text[pos]))) {
      ++pos;
      continue;
    }
    const auto [length, id] = trie.longest_at(text, pos);
    if (id < 0) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + length;
    pos = stop;  // the search resumes after the match, whatever happens to it below
    const AddedToken& token = *find(id);
    if (token.single_word) {
      bool word_before = false, word_after = false;
      if (start > 0) {
        size_t i = start;
        utf8::previous_code_point(text, i);
        word_before = is_word_char(i);
      }
      if (stop < text.size()) word_after = is_word_char(stop);
      if (word_before || word_after) continue;
    }
    if (token.lstrip) {
      size_t new_start = start;
      while (new_start > 0) {
        size_t i = new_start;
        if (!utf8::is_white_space(utf8::previous_code_point(text, i))) break;
        new_start = i;
      }
      start = std::max(new_start, start_offset);
    }
    if (token.rstrip) {
      while (stop < text.size()) {
        size_t i = stop;
        if (!utf8::is_white_space(utf8::next_code_point(text, i))) break;
        stop = i;
      }
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, id});
    start_offset = stop;
  }
  if (start_offset != text.size()) out.push_back({start_offset, text.size(), -1});
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  auto it = id_by_content_.find(std::string(content));
  if (it == id_by_content_.end()) return std::nullopt;
  return it->second;
}

const AddedToken* AddedVocabulary::find(int32_t id) const {
  auto it = index_by_id_.find(id);
  return it == index_by_id_.end() ? nullptr : &tokens_[it->second];
}

bool AddedVocabulary::is_special(std::string_view content) const {
  return special_contents_.contains(std::string(content));
}

size_t AddedVocabulary::count_not_in(const BpeModel& model) const {
  size_t n = 0;
  for (const auto& [content, id] : id_by_content_) n += model.token_to_id(content) ? 0 : 1;
  return n;
}

}  // namespace deepinfer
