// GrammarCache: structured-output constraints compiled once and shared, by (kind, text), in a
// bounded LRU: the CompiledGrammar and its GrammarMaskCache, so that later requests of the same
// schema (and the n samples of one) start with its masks warm. Compile errors are kept as well,
// so a bad schema sent again costs a lookup.
//
// get() compiles on the calling thread (a request worker, never the engine thread) under the
// grammar engine's limits (GrammarLimits, JsonSchemaOptions), and computes the mask of the
// grammar's first state there too, so that the costliest mask of most grammars is paid off the
// engine thread and a grammar whose automaton passes its limits at once is refused up front.
// A mask cache whose automaton later passed a limit (status() failed) is replaced by a fresh one
// for new requests.
// Thread-safe: one mutex over the index; compiles run outside it (two workers compiling the
// same text at once both compile, and the last to finish is kept).
//
// warm_frames() computes the vocabulary's JSON frames (grammar/frame_warmup.h) on a thread of
// its own, so that the first requests do not pay them on the engine thread; the destructor
// stops and joins it.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "grammar/compiled_grammar.h"
#include "grammar/grammar_mask_cache.h"
#include "grammar/token_vocabulary.h"
#include "server/openai_request.h"

namespace deepinfer {

struct GrammarCacheOptions {
  size_t max_entries = 256;             // grammars (and errors) kept
  size_t max_text_bytes = 64u << 20;    // their texts, all together
  grammar::JsonSchemaOptions json_schema;  // its limits also bound regex and grammar compiles
  grammar::MatcherOptions matcher;      // per grammar: automaton limits and cached-mask bytes
};

class GrammarCache {
 public:
  GrammarCache(std::shared_ptr<const grammar::TokenVocabulary> vocabulary, GrammarCacheOptions options);

  // The mask cache of `constraint` (kind != kNone), or the error naming what is wrong with it.
  Result<std::shared_ptr<grammar::GrammarMaskCache>> get(const OutputConstraint& constraint);

  size_t n_entries();

  // Starts the background warm-up of the JSON frames of each of `options` (once).
  void warm_frames(std::vector<grammar::JsonSchemaOptions> options);
  ~GrammarCache();

 private:
  struct Entry {
    std::string key;
    Status error;                                   // failed: the constraint does not compile
    std::shared_ptr<const grammar::CompiledGrammar> grammar;
    std::shared_ptr<grammar::GrammarMaskCache> masks;
  };
  using Lru = std::list<Entry>;  // most recently used first

  Entry compile(const OutputConstraint& constraint, std::string key) const;
  // A mask cache over `grammar` with its first state's mask computed; the error if that passes a limit.
  Result<std::shared_ptr<grammar::GrammarMaskCache>> warm_masks(const grammar::CompiledGrammar& grammar) const;
  void insert(Entry entry);

  std::shared_ptr<const grammar::TokenVocabulary> vocabulary_;
  GrammarCacheOptions options_;
  std::mutex mu_;
  Lru lru_;
  std::unordered_map<std::string, Lru::iterator> index_;
  size_t text_bytes_ = 0;
  std::atomic<bool> cancel_warm_ = false;
  std::thread warm_thread_;
};

}  // namespace deepinfer
