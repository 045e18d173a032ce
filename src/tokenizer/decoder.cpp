#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/json_fields.h"
#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

using json_fields::json;

// The byte of a "<0xXX>" token, or -1.
int byte_token_value(std::string_view token) {
  if (token.size() != 6 || !token.starts_with("<0x") || token.back() != '>') return -1;
  int value = 0;
  for (char c : token.substr(3, 2)) {
    value *= 16;
    if (c >= '0' && c <= '9') {
      value += c - '0';
    } else if (c >= 'A' && c <= 'F') {
      value += c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      value += c - 'a' + 10;
    } else {
      return -1;
    }
  }
  return value;
}

// Reads a one-character string field (Metaspace replacement, Strip content).
Result<std::string> get_char(const json& j, const char* key, const std::string& where) {
  DI_ASSIGN_OR_RETURN(std::string s, json_fields::get_string(j, key, where));
  size_t i = 0;
  if (s.empty() || utf8::find_invalid(s) != std::string::npos ||
      (utf8::next_code_point(s, i), i != s.size())) {
    return json_fields::missing(where, key, "one character");
  }
  return s;
}

}  // namespace

Status Decoder::add_steps(const json& config, const std::string& where, std::vector<Step>& steps) {
  DI_ASSIGN_OR_RETURN(std::string type, json_fields::get_type(config, where));
  Step step{};
  if (type == "Sequence") {
    auto it = config.find("decoders");
    if (it == config.end() || !it->is_array()) return json_fields::missing(where, "decoders", "a list");
    for (size_t i = 0; i < it->size(); ++i) {
      DI_RETURN_IF_ERROR(add_steps((*it)[i], where + ".decoders[" + std::to_string(i) + "]", steps));
    }
    return Status::Ok();
  } else if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
  } else if (type == "Metaspace") {
    step.kind = Kind::kMetaspace;
    DI_ASSIGN_OR_RETURN(step.content, get_char(config, "replacement", where));
    std::string scheme = "always";
    if (auto it = config.find("prepend_scheme"); it != config.end() && it->is_string()) {
      scheme = it->get<std::string>();
    }
    DI_ASSIGN_OR_RETURN(bool add_prefix, json_fields::get_bool(config, "add_prefix_space", true, where));
    step.metaspace_strips_first = scheme != "never" && add_prefix;
  } else if (type == "ByteFallback") {
    step.kind = Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    DI_ASSIGN_OR_RETURN(step.content, get_char(config, "content", where));
    DI_ASSIGN_OR_RETURN(step.strip_start, json_fields::get_size(config, "start", 0, where));
    DI_ASSIGN_OR_RETURN(step.strip_stop, json_fields::get_size(config, "stop", 0, where));
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    DI_ASSIGN_OR_RETURN(step.content, json_fields::get_string(config, "content", where));
    DI_ASSIGN_OR_RETURN(step.pattern, json_fields::get_pattern(config, "pattern", where));
    const json& pattern = config["pattern"];
    if (auto it = pattern.find("String"); it != pattern.end()) {
      const std::string& literal = it->get_ref<const std::string&>();
      size_t i = 0;
      step.single_char_pattern = !literal.empty() && utf8::find_invalid(literal) == std::string::npos &&
                                 (utf8::next_code_point(literal, i), i == literal.size());
    }
  } else if (type == "BPEDecoder") {
    step.kind = Kind::kBpeSuffix;
    step.content = "</w>";
    if (auto it = config.find("suffix"); it != config.end() && it->is_string()) {
      step.content = it->get<std::string>();
    }
  } else {
    return Status::Error(where + ": decoder type '" + type + "' is not supported");
  }
  steps.push_back(std::move(step));
  return Status::Ok();
}

Result<Decoder> Decoder::FromJson(const json& config) {
  Decoder d;
  if (config.is_null()) return d;
  d.none_ = false;
  DI_RETURN_IF_ERROR(add_steps(config, "decoder", d.steps_));
  // Whether decoding a window of tokens with `continuation` gives exactly the window's share of
  // the whole text: true while every step is local to a token, or to the start of the text.
  bool fused = false;  // an earlier step joined all tokens into one
  for (const Step& step : d.steps_) {
    switch (step.kind) {
      case Kind::kByteLevel:
        d.stream_local_ = d.stream_local_ && !fused;  // its per-token rule would see fused text
        fused = true;
        break;
      case Kind::kFuse:
        fused = true;
        break;
      case Kind::kStrip:
        d.stream_local_ = d.stream_local_ && !(fused && step.strip_stop > 0);
        break;
      case Kind::kReplace:
        // A literal one-character pattern cannot straddle two windows.
        d.stream_local_ = d.stream_local_ && (!fused || step.single_char_pattern);
        break;
      case Kind::kBpeSuffix:
        d.stream_local_ = false;
        break;
      case Kind::kByteFallback:
        d.has_byte_fallback_ = true;
        break;
      case Kind::kMetaspace:
        break;
    }
  }
  return d;
}

Result<std::string> Decoder::decode(std::vector<std::string> tokens, bool continuation) const {
  if (none_) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0 || continuation) out.push_back(' ');
      out += tokens[i];
    }
    return out;
  }
  bool fused = false;
  std::vector<Regex::Match> matches;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kByteLevel: {
        std::string bytes;
        for (const std::string& t : tokens) {
          const size_t mark = bytes.size();
          bool all_mapped = true;
          for (size_t i = 0; i < t.size() && all_mapped;) {
            const int b = byte_level::byte_for_char(utf8::next_code_point(t, i));
            all_mapped = b >= 0;
            bytes.push_back(static_cast<char>(b));
          }
          if (!all_mapped) {
            bytes.resize(mark);
            bytes += t;
          }
        }
        std::string text;
        utf8::append_lossy(text, bytes);
        tokens.assign(1, std::move(text));
        fused = true;
        break;
      }
      case Kind::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          const bool drop = i == 0 && !continuation && step.metaspace_strips_first;
          std::string out;
          const std::string& t = tokens[i];
          for (size_t pos = 0;;) {
            const size_t hit = t.find(step.content, pos);
            out.append(t, pos, hit == std::string::npos ? std::string::npos : hit - pos);
            if (hit == std::string::npos) break;
            if (!drop) out.push_back(' ');
            pos = hit + step.content.size();
          }
          tokens[i] = std::move(out);
        }
        break;
      case Kind::kByteFallback: {
        std::vector<std::string> out;
        std::string bytes;
        auto flush = [&] {
          if (bytes.empty()) return;
          if (utf8::find_invalid(bytes) == std::string::npos) {
            out.push_back(bytes);
          } else {
            for (size_t i = 0; i < bytes.size(); ++i) out.emplace_back(utf8::kReplacementChar);
          }
          bytes.clear();
        };
        for (std::string& t : tokens) {
          const int b = byte_token_value(t);
          if (b >= 0) {
            bytes.push_back(static_cast<char>(b));
          } else {
            flush();
            out.push_back(std::move(t));
          }
        }
        flush();
        tokens = std::move(out);
        break;
      }
      case Kind::kFuse: {
        std::string joined;
        for (const std::string& t : tokens) joined += t;
        tokens.assign(1, std::move(joined));
        fused = true;
        break;
      }
      case Kind::kStrip:
        for (std::string& t : tokens) {
          // Cut up to strip_start leading and strip_stop trailing copies of the character; the
          // start of fused text that continues earlier text is not the start of a token.
          const std::string& c = step.content;
          size_t begin = 0, end = t.size();
          if (!(fused && continuation)) {
            for (size_t k = 0; k < step.strip_start && t.compare(begin, c.size(), c) == 0; ++k) begin += c.size();
          }
          for (size_t k = 0; k < step.strip_stop && end >= begin + c.size() &&
                             t.compare(end - c.size(), c.size(), c) == 0;
               ++k) {
            end -= c.size();
          }
          t = t.substr(begin, end - begin);
        }
        break;
      case Kind::kReplace:
        for (std::string& t : tokens) {
          if (t.empty()) continue;
          DI_RETURN_IF_ERROR(step.pattern->find_all(t, matches));
          if (matches.empty()) continue;
          std::string out;
          size_t previous = 0;
          for (const Regex::Match& m : matches) {
            out.append(t, previous, m.start - previous);
            out += step.content;
            previous = m.end;
          }
          out.append(t, previous);
          t = std::move(out);
        }
        break;
      case Kind::kBpeSuffix:
        for (size_t i = 0; i < tokens.size(); ++i) {
          std::string& t = tokens[i];
          const std::string with = i + 1 == tokens.size() ? "" : " ";
          std::string out;
          for (size_t pos = 0;;) {
            const size_t hit = step.content.empty() ? std::string::npos : t.find(step.content, pos);
            out.append(t, pos, hit == std::string::npos ? std::string::npos : hit - pos);
            if (hit == std::string::npos) break;
            out += with;
            pos = hit + step.content.size();
          }
          t = std::move(out);
        }
        break;
    }
  }
  std::string text;
  for (const std::string& t : tokens) text += t;
  return text;
}

}  // namespace deepinfer
