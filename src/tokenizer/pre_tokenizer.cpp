#include "tokenizer/pre_tokenizer.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/unicode_tables.h"

namespace deepinfer {
namespace {

using json_fields::json;

// GPT-2's pre-tokenization pattern (ByteLevel with use_regex), Oniguruma syntax.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Whitespace's pattern \w+|[^\w\s]+ with the Rust regex crate's Unicode \w and \s.
std::string whitespace_pattern() {
  const std::string word = unicode::class_body(unicode::rust_word_chars());
  return "[" + word + "]+|[^" + word + "\\p{White_Space}]+";
}

// One character of a set (Digits, Punctuation).
std::string one_of(std::span<const unicode::CodePointRange> ranges) {
  return "[" + unicode::class_body(ranges) + "]";
}

}  // namespace

Result<PreTokenizer::Behavior> PreTokenizer::parse_behavior(const json& config,
                                                            const std::string& where,
                                                            Behavior fallback) {
  auto it = config.find("behavior");
  if (it == config.end() || it->is_null()) return fallback;
  const std::string name = it->is_string() ? it->get<std::string>() : "";
  if (name == "Removed") return Behavior::kRemoved;
  if (name == "Isolated") return Behavior::kIsolated;
  if (name == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return Behavior::kMergedWithNext;
  if (name == "Contiguous") return Behavior::kContiguous;
  return Status::Error(where + ": unknown split behavior '" + name + "'");
}

Status PreTokenizer::add_steps(const json& config, const std::string& where,
                               std::vector<Step>& steps) {
  if (config.is_null()) return Status::Ok();
  DI_ASSIGN_OR_RETURN(std::string type, json_fields::get_type(config, where));
  Step step;
  if (type == "Sequence") {
    auto it = config.find("pretokenizers");
    if (it == config.end() || !it->is_array()) {
      return json_fields::missing(where, "pretokenizers", "a list");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      DI_RETURN_IF_ERROR(
          add_steps((*it)[i], where + ".pretokenizers[" + std::to_string(i) + "]", steps));
    }
    return Status::Ok();
  } else if (type == "Split") {
    DI_ASSIGN_OR_RETURN(step.regex, json_fields::get_pattern(config, "pattern", where));
    DI_ASSIGN_OR_RETURN(step.behavior, parse_behavior(config, where, Behavior::kIsolated));
    DI_ASSIGN_OR_RETURN(step.invert, json_fields::get_bool(config, "invert", false, where));
  } else if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
    DI_ASSIGN_OR_RETURN(step.add_prefix_space,
                        json_fields::get_bool(config, "add_prefix_space", true, where));
    DI_ASSIGN_OR_RETURN(bool use_regex, json_fields::get_bool(config, "use_regex", true, where));
    if (use_regex) {
      DI_ASSIGN_OR_RETURN(step.regex, Regex::FromOniguruma(kGpt2Pattern));
    }
  } else if (type == "Digits") {
    DI_ASSIGN_OR_RETURN(bool individual,
                        json_fields::get_bool(config, "individual_digits", false, where));
    DI_ASSIGN_OR_RETURN(step.regex, Regex::FromPcre2(one_of(unicode::numeric())));
    step.behavior = individual ? Behavior::kIsolated : Behavior::kContiguous;
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    DI_ASSIGN_OR_RETURN(step.replacement, json_fields::get_string(config, "replacement", where));
    std::string scheme = "always";
    if (auto it = config.find("prepend_scheme"); it != config.end() && it->is_string()) {
      scheme = it->get<std::string>();
    }
    if (scheme == "first") {
      step.prepend = Prepend::kFirst;
    } else if (scheme == "never") {
      step.prepend = Prepend::kNever;
    } else if (scheme == "always") {
      step.prepend = Prepend::kAlways;
    } else {
      return Status::Error(where + ": unknown prepend_scheme '" + scheme + "'");
    }
    // Older files say add_prefix_space: false instead of prepend_scheme "never".
    DI_ASSIGN_OR_RETURN(bool add_prefix, json_fields::get_bool(config, "add_prefix_space", true, where));
    if (!add_prefix) step.prepend = Prepend::kNever;
    DI_ASSIGN_OR_RETURN(bool split, json_fields::get_bool(config, "split", true, where));
    if (split) {
      DI_ASSIGN_OR_RETURN(step.regex, Regex::FromLiteral(step.replacement));
      step.behavior = Behavior::kMergedWithNext;
    }
  } else if (type == "Whitespace") {
    DI_ASSIGN_OR_RETURN(step.regex, Regex::FromPcre2(whitespace_pattern()));
    step.behavior = Behavior::kRemoved;
    step.invert = true;
  } else if (type == "WhitespaceSplit") {
    DI_ASSIGN_OR_RETURN(step.regex, Regex::FromPcre2("\\p{White_Space}"));
    step.behavior = Behavior::kRemoved;
  } else if (type == "Punctuation") {
    DI_ASSIGN_OR_RETURN(step.regex, Regex::FromPcre2(one_of(unicode::punctuation())));
    DI_ASSIGN_OR_RETURN(step.behavior, parse_behavior(config, where, Behavior::kIsolated));
  } else if (type == "CharDelimiterSplit") {
    DI_ASSIGN_OR_RETURN(std::string delimiter, json_fields::get_string(config, "delimiter", where));
    DI_ASSIGN_OR_RETURN(step.regex, Regex::FromLiteral(delimiter));
    step.behavior = Behavior::kRemoved;
  } else {
    return Status::Error(where + ": pre-tokenizer type '" + type + "' is not supported");
  }
  steps.push_back(std::move(step));
  return Status::Ok();
}

Result<PreTokenizer> PreTokenizer::FromJson(const json& config) {
  PreTokenizer p;
  DI_RETURN_IF_ERROR(add_steps(config, "pre_tokenizer", p.steps_));
  for (size_t i = 0; i + 1 < p.steps_.size(); ++i) {
    if (p.steps_[i].kind == Kind::kByteLevel) p.steps_[i].map_bytes_now = true;
  }
  return p;
}

Status PreTokenizer::split_pieces(const Step& step, Pieces& state, const std::vector<Piece>& in,
                                  std::vector<Piece>& out) {
  struct Span {
    size_t start, end;
    bool is_match;
  };
  std::vector<Regex::Match>& matches = state.matches;
  for (const Piece& piece : in) {
    const std::string_view text = piece.text;
    DI_RETURN_IF_ERROR(step.regex->find_all(text, matches));
    auto emit = [&](size_t start, size_t end) {
      if (end > start) out.push_back({text.substr(start, end - start), piece.at_text_start && start == 0});
    };
    // Walk the spans in order; `pending` is the span being grown by a merge behavior.
    bool has_pending = false;
    Span pending{0, 0, false};
    bool previous_match = false;
    auto handle = [&](Span span) {
      if (step.invert) span.is_match = !span.is_match;
      switch (step.behavior) {
        case Behavior::kIsolated:
          emit(span.start, span.end);
          break;
        case Behavior::kRemoved:
          if (!span.is_match) emit(span.start, span.end);
          break;
        case Behavior::kContiguous:
          if (has_pending && span.is_match == previous_match) {
            pending.end = span.end;
          } else {
            if (has_pending) emit(pending.start, pending.end);
            pending = span, has_pending = true;
          }
          break;
        case Behavior::kMergedWithPrevious:
          if (has_pending && span.is_match && !previous_match) {
            pending.end = span.end;
          } else {
            if (has_pending) emit(pending.start, pending.end);
            pending = span, has_pending = true;
          }
          break;
        case Behavior::kMergedWithNext:
          // The library folds right to left: a match absorbs the span after it when that span
          // is not a match. Left to right: a non-match joins a preceding match.
          if (has_pending && !span.is_match && previous_match) {
            pending.end = span.end;
          } else {
            if (has_pending) emit(pending.start, pending.end);
            pending = span, has_pending = true;
          }
          break;
      }
      previous_match = span.is_match;
    };
    if (text.empty()) continue;
    // The spans covering the piece, in order: matches and the text between them.
    size_t previous = 0;
    for (const Regex::Match& m : matches) {
      if (m.start != previous) handle({previous, m.start, false});
      handle({m.start, m.end, true});
      previous = m.end;
    }
    if (previous != text.size()) handle({previous, text.size(), false});
    if (has_pending) emit(pending.start, pending.end);
  }
  return Status::Ok();
}

Status PreTokenizer::split(std::string_view text, bool at_text_start, Pieces& out) const {
  out.clear();
  if (text.empty()) return Status::Ok();
  out.pieces.push_back({text, at_text_start});
  for (const Step& step : steps_) {
    std::vector<Piece>& next = out.scratch;
    next.clear();
    switch (step.kind) {
      case Kind::kSplit:
        DI_RETURN_IF_ERROR(split_pieces(step, out, out.pieces, next));
        break;
      case Kind::kByteLevel: {
        std::vector<Piece>* source = &out.pieces;
        std::vector<Piece> prefixed;
        if (step.add_prefix_space) {
          prefixed.reserve(out.pieces.size());
          for (const Piece& p : out.pieces) {
            prefixed.push_back(p.text.starts_with(' ')
                                   ? p
                                   : Piece{out.store(" " + std::string(p.text)), p.at_text_start});
          }
          source = &prefixed;
        }
        if (step.regex) {
          DI_RETURN_IF_ERROR(split_pieces(step, out, *source, next));
        } else {
          next = *source;
        }
        if (step.map_bytes_now) {
          for (Piece& p : next) {
            std::string mapped;
            byte_level::append_mapped(mapped, p.text);
            p.text = out.store(std::move(mapped));
          }
        } else {
          out.byte_level = true;
        }
        break;
      }
      case Kind::kMetaspace: {
        std::vector<Piece> replaced;
        replaced.reserve(out.pieces.size());
        for (const Piece& p : out.pieces) {
          std::string s;
          s.reserve(p.text.size() + step.replacement.size());
          const bool starts = p.text.starts_with(' ') ||
                              (!step.replacement.empty() && p.text.starts_with(step.replacement));
          if (!starts && (step.prepend == Prepend::kAlways ||
                          (step.prepend == Prepend::kFirst && p.at_text_start))) {
            s += step.replacement;
          }
          for (char c : p.text) {
            if (c == ' ') {
              s += step.replacement;
            } else {
              s.push_back(c);
            }
          }
          replaced.push_back({out.store(std::move(s)), p.at_text_start});
        }
        if (step.regex) {
          DI_RETURN_IF_ERROR(split_pieces(step, out, replaced, next));
        } else {
          next = std::move(replaced);
        }
        break;
      }
    }
    std::swap(out.pieces, next);
  }
  return Status::Ok();
}

}  // namespace deepinfer
