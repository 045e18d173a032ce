#include "server/grammar_cache.h"

#include <vector>

#include "grammar/frame_warmup.h"
#include "server/tool_call_grammar.h"

namespace deepinfer {

namespace {

using grammar::CompiledGrammar;
using grammar::GrammarMaskCache;

Result<CompiledGrammar> compile_text(const OutputConstraint& c, const grammar::JsonSchemaOptions& options) {
  using Kind = OutputConstraint::Kind;
  switch (c.kind) {
    case Kind::kJsonObject: return CompiledGrammar::AnyJsonObject(options);
    case Kind::kJsonSchema: return CompiledGrammar::FromJsonSchema(c.text, options);
    case Kind::kRegex: return CompiledGrammar::FromRegex(c.text, options.limits);
    case Kind::kGrammar: return CompiledGrammar::FromEbnf(c.text, options.limits);
    case Kind::kToolCalls: return compile_tool_call_grammar(c.text, options);
    case Kind::kNone: break;
  }
  return Status::Error("no constraint");
}

// Where in the request the problem lies, for the message.
std::string where(const OutputConstraint& c) {
  return c.kind == OutputConstraint::Kind::kJsonSchema ? "response_format.json_schema.schema" : c.param;
}

// The request field an error names: its own, else the constraint's.
std::string field_of(const Status& error, const OutputConstraint& c) {
  return error.field().empty() ? c.param : error.field();
}

}  // namespace

GrammarCache::GrammarCache(std::shared_ptr<const grammar::TokenVocabulary> vocabulary, GrammarCacheOptions options)
    : vocabulary_(std::move(vocabulary)), options_(std::move(options)) {}

Result<std::shared_ptr<GrammarMaskCache>> GrammarCache::warm_masks(const CompiledGrammar& grammar) const {
  auto masks = std::make_shared<GrammarMaskCache>(grammar, vocabulary_, options_.matcher);
  std::vector<uint32_t> mask(vocabulary_->bitmask_words());
  masks->fill_mask(masks->initial_state(), mask.data());
  if (Status s = masks->status(); !s.ok()) return s;
  return masks;
}

GrammarCache::Entry GrammarCache::compile(const OutputConstraint& constraint, std::string key) const {
  Entry e;
  e.key = std::move(key);
  auto compiled = compile_text(constraint, options_.json_schema);
  if (!compiled.ok()) {
    // Tool-call constraint errors already name the tool's field (or response_format's, with it).
    e.error = constraint.kind == OutputConstraint::Kind::kToolCalls
                  ? compiled.status()
                  : Status::Error("'" + where(constraint) + "': " + compiled.status().message());
    return e;
  }
  e.grammar = std::make_shared<const CompiledGrammar>(std::move(compiled).value());
  auto masks = warm_masks(*e.grammar);
  if (!masks.ok()) {
    e.error = Status::Error("'" + where(constraint) + "' is too complex to match: " + masks.status().message());
    e.grammar.reset();
    return e;
  }
  e.masks = std::move(masks).value();
  return e;
}

Result<std::shared_ptr<GrammarMaskCache>> GrammarCache::get(const OutputConstraint& constraint) {
  std::string key = std::to_string(int(constraint.kind)) + ":" + constraint.text;
  std::shared_ptr<const CompiledGrammar> stale;  // a grammar whose mask cache failed
  {
    std::lock_guard lock(mu_);
    if (auto it = index_.find(key); it != index_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      const Entry& e = *it->second;
      if (!e.error.ok()) return Status(e.error).with_field(field_of(e.error, constraint));
      if (e.masks->status().ok()) return e.masks;
      stale = e.grammar;
    }
  }
  Entry e;
  if (stale) {
    e.key = std::move(key);
    e.grammar = std::move(stale);
    auto masks = warm_masks(*e.grammar);
    if (!masks.ok())
      return Status::Error("'" + where(constraint) + "' is too complex to match: " + masks.status().message())
          .with_field(constraint.param);
    e.masks = std::move(masks).value();
  } else {
    e = compile(constraint, std::move(key));
  }
  Result<std::shared_ptr<GrammarMaskCache>> out =
      e.error.ok() ? Result<std::shared_ptr<GrammarMaskCache>>(e.masks)
                   : Status(e.error).with_field(field_of(e.error, constraint));
  insert(std::move(e));
  return out;
}

void GrammarCache::insert(Entry entry) {
  std::lock_guard lock(mu_);
  if (auto it = index_.find(entry.key); it != index_.end()) {
    text_bytes_ -= it->second->key.size();
    lru_.erase(it->second);
    index_.erase(it);
  }
  text_bytes_ += entry.key.size();
  lru_.push_front(std::move(entry));
  index_[lru_.front().key] = lru_.begin();
  while (lru_.size() > 1 && (lru_.size() > options_.max_entries || text_bytes_ > options_.max_text_bytes)) {
    text_bytes_ -= lru_.back().key.size();
    index_.erase(lru_.back().key);
    lru_.pop_back();
  }
}

void GrammarCache::warm_frames(std::vector<grammar::JsonSchemaOptions> options) {
  if (warm_thread_.joinable()) return;
  warm_thread_ = std::thread([this, options = std::move(options)] {
    for (const grammar::JsonSchemaOptions& o : options) grammar::warm_json_frames(vocabulary_, o, cancel_warm_);
  });
}

GrammarCache::~GrammarCache() {
  cancel_warm_ = true;
  if (warm_thread_.joinable()) warm_thread_.join();
}

size_t GrammarCache::n_entries() {
  std::lock_guard lock(mu_);
  return lru_.size();
}

}  // namespace deepinfer
