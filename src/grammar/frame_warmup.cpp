#include "grammar/frame_warmup.h"

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/compiled_grammar.h"
#include "grammar/grammar_mask_cache.h"

namespace deepinfer::grammar {
namespace {

// Each generic part of JSON once: plain strings, numbers, integers, booleans, null, arrays of
// any values and objects of any members (whose values reach every kind again).
constexpr const char* kSchema = R"({"type": "object", "properties": {
  "s": {"type": "string"}, "n": {"type": "number"}, "i": {"type": "integer"}, "b": {"type": "boolean"},
  "z": {"type": "null"}, "a": {"type": "array"}, "o": {"type": "object"}}, "additionalProperties": false})";

// Texts of kSchema through every part, with the separators spaced (when the options allow) and
// compact: escapes, multi-byte characters, signs, fractions and exponents, nesting.
std::vector<std::string> sample_texts(bool spaced) {
  const std::string c = spaced ? ": " : ":", s = spaced ? ", " : ",";
  const std::string value_mix = "[\"x\"" + s + "1.5" + s + "false" + s + "null" + s + "{\"k\"" + c + "[0" + s + "-7e+2]}" +
                                s + "[]" + s + "{}]";
  return {
      "{\"s\"" + c + "\"ab \\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD7FF é中😀>|\"" + s + "\"n\"" + c + "-12.50e+3" + s + "\"i\"" + c +
          "-42" + s + "\"b\"" + c + "true" + s + "\"z\"" + c + "null" + s + "\"a\"" + c + value_mix + s + "\"o\"" + c +
          "{\"p\"" + c + "\"q\"" + s + "\"r\"" + c + "{\"t\"" + c + "true}" + s + "\"u\"" + c + "0.0E-1}}",
      "{\"n\"" + c + "0" + s + "\"i\"" + c + "7" + s + "\"b\"" + c + "false" + s + "\"a\"" + c + "[]" + s + "\"o\"" + c + "{}}",
      "{\"n\"" + c + "3E5" + s + "\"i\"" + c + "1234567890" + s + "\"s\"" + c + "\"\"}",
  };
}

}  // namespace

size_t warm_json_frames(const std::shared_ptr<const TokenVocabulary>& vocabulary, const JsonSchemaOptions& options,
                        const std::atomic<bool>& cancel) {
  auto g = CompiledGrammar::FromJsonSchema(kSchema, options);
  if (!g.ok()) return 0;
  GrammarMaskCache cache(g.value(), vocabulary);
  std::vector<uint32_t> mask(vocabulary->bitmask_words());
  size_t n_filled = 0;
  std::vector<bool> spacings = {false};
  if (options.separator_space) spacings.push_back(true);
  for (bool spaced : spacings) {
    for (const std::string& text : sample_texts(spaced)) {
      int32_t state = cache.initial_state();
      for (size_t i = 0; i <= text.size() && state != GrammarAutomaton::kDead; ++i) {
        if (cancel.load(std::memory_order_relaxed)) return n_filled;
        cache.fill_mask(state, mask.data());
        ++n_filled;
        if (i < text.size()) state = cache.walk(state, std::string_view(text).substr(i, 1));
      }
    }
  }
  return n_filled;
}

}  // namespace deepinfer::grammar
