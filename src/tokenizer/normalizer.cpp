#include "tokenizer/normalizer.h"

#include "tokenizer/json_fields.h"
#include "tokenizer/unicode_normalization.h"
#include "tokenizer/unicode_tables.h"
#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

using json_fields::json;

}  // namespace

Status Normalizer::add_steps(const json& config, const std::string& where, std::vector<Step>& steps) {
  if (config.is_null()) return Status::Ok();
  // Not DI_ASSIGN_OR_RETURN: GCC 12 warns (wrongly) that the moved-out string may be uninitialized.
  const Result<std::string> type_or = json_fields::get_type(config, where);
  if (!type_or.ok()) return type_or.status();
  const std::string& type = type_or.value();
  if (type == "Sequence") {
    auto it = config.find("normalizers");
    if (it == config.end() || !it->is_array()) return json_fields::missing(where, "normalizers", "a list");
    for (size_t i = 0; i < it->size(); ++i) {
      DI_RETURN_IF_ERROR(add_steps((*it)[i], where + ".normalizers[" + std::to_string(i) + "]", steps));
    }
    return Status::Ok();
  }
  Step step{};
  if (type == "NFC") {
    step.kind = Kind::kNfc;
  } else if (type == "NFD") {
    step.kind = Kind::kNfd;
  } else if (type == "NFKC") {
    step.kind = Kind::kNfkc;
  } else if (type == "NFKD") {
    step.kind = Kind::kNfkd;
  } else if (type == "Lowercase") {
    step.kind = Kind::kLowercase;
  } else if (type == "Prepend") {
    step.kind = Kind::kPrepend;
    DI_ASSIGN_OR_RETURN(step.content, json_fields::get_string(config, "prepend", where));
  } else if (type == "Replace") {
    step.kind = Kind::kReplace;
    DI_ASSIGN_OR_RETURN(step.content, json_fields::get_string(config, "content", where));
    DI_ASSIGN_OR_RETURN(step.pattern, json_fields::get_pattern(config, "pattern", where));
  } else if (type == "Strip") {
    step.kind = Kind::kStrip;
    DI_ASSIGN_OR_RETURN(step.strip_left, json_fields::get_bool(config, "strip_left", true, where));
    DI_ASSIGN_OR_RETURN(step.strip_right, json_fields::get_bool(config, "strip_right", true, where));
  } else {
    return Status::Error(where + ": normalizer type '" + type + "' is not supported");
  }
  steps.push_back(std::move(step));
  return Status::Ok();
}

Result<Normalizer> Normalizer::FromJson(const json& config) {
  Normalizer n;
  DI_RETURN_IF_ERROR(add_steps(config, "normalizer", n.steps_));
  return n;
}

Status Normalizer::apply(std::string& text) const {
  std::vector<Regex::Match> matches;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kNfc:
      case Kind::kNfd:
      case Kind::kNfkc:
      case Kind::kNfkd:
        unicode::normalize(text, step.kind == Kind::kNfc    ? unicode::NormalForm::kNfc
                                 : step.kind == Kind::kNfd  ? unicode::NormalForm::kNfd
                                 : step.kind == Kind::kNfkc ? unicode::NormalForm::kNfkc
                                                            : unicode::NormalForm::kNfkd);
        break;
      case Kind::kLowercase: {
        std::string out;
        out.reserve(text.size());
        for (size_t i = 0; i < text.size();) {
          const auto b = static_cast<unsigned char>(text[i]);
          if (b < 0x80) {
            out.push_back(static_cast<char>(b >= 'A' && b <= 'Z' ? b + 32 : b));
            ++i;
            continue;
          }
          // One code point at a time, with no context, as Rust's char::to_lowercase.
          const size_t start = i;
          if (const char* lower = unicode::lowercase(utf8::next_code_point(text, i))) {
            out += lower;
          } else {
            out.append(text, start, i - start);
          }
        }
        text = std::move(out);
        break;
      }
      case Kind::kPrepend:
        if (!text.empty()) text.insert(0, step.content);
        break;
      case Kind::kReplace: {
        if (text.empty()) break;
        DI_RETURN_IF_ERROR(step.pattern->find_all(text, matches));
        if (matches.empty()) break;
        std::string out;
        size_t previous = 0;
        for (const Regex::Match& m : matches) {
          out.append(text, previous, m.start - previous);
          out += step.content;
          previous = m.end;
        }
        out.append(text, previous);
        text = std::move(out);
        break;
      }
      case Kind::kStrip: {
        size_t begin = 0, end = text.size();
        if (step.strip_left) {
          while (begin < end) {
            size_t next = begin;
            if (!utf8::is_white_space(utf8::next_code_point(text, next))) break;
            begin = next;
          }
        }
        if (step.strip_right) {
          while (end > begin) {
            size_t previous = end;
            if (!utf8::is_white_space(utf8::previous_code_point(text, previous))) break;
            end = previous;
          }
        }
        text = text.substr(begin, end - begin);
        break;
      }
    }
  }
  return Status::Ok();
}

}  // namespace deepinfer
