#include "tokenizer/post_processor.h"

#include "tokenizer/json_fields.h"

namespace deepinfer {
namespace {

using json_fields::json;

// A [token, id] pair of BertProcessing/RobertaProcessing.
Result<int32_t> pair_id(const json& config, const char* key, const std::string& where) {
  auto it = config.find(key);
  if (it == config.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_number_unsigned()) {
    return json_fields::missing(where, key, "a [token, id] pair");
  }
  return static_cast<int32_t>((*it)[1].get<uint64_t>());
}

}  // namespace

Status PostProcessor::add_frames(const json& config, const std::string& where,
                                 std::vector<Frame>& frames) {
  DI_ASSIGN_OR_RETURN(std::string type, json_fields::get_type(config, where));
  if (type == "Sequence") {
    auto it = config.find("processors");
    if (it == config.end() || !it->is_array()) return json_fields::missing(where, "processors", "a list");
    for (size_t i = 0; i < it->size(); ++i) {
      DI_RETURN_IF_ERROR(add_frames((*it)[i], where + ".processors[" + std::to_string(i) + "]", frames));
    }
    return Status::Ok();
  }
  if (type == "ByteLevel") return Status::Ok();
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    DI_ASSIGN_OR_RETURN(int32_t cls, pair_id(config, "cls", where));
    DI_ASSIGN_OR_RETURN(int32_t sep, pair_id(config, "sep", where));
    frames.push_back({{cls}, {sep}});
    return Status::Ok();
  }
  if (type != "TemplateProcessing") {
    return Status::Error(where + ": post-processor type '" + type + "' is not supported");
  }
  auto single = config.find("single");
  auto specials = config.find("special_tokens");
  if (single == config.end() || !single->is_array()) return json_fields::missing(where, "single", "a list");
  if (specials == config.end() || !specials->is_object()) {
    return json_fields::missing(where, "special_tokens", "an object");
  }
  Frame frame;
  bool seen_sequence = false;
  for (const json& piece : *single) {
    if (piece.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    auto special = piece.find("SpecialToken");
    if (special == piece.end() || !special->contains("id") || !(*special)["id"].is_string()) {
      return Status::Error(where + ".single: each item must be a Sequence or a SpecialToken");
    }
    const std::string name = (*special)["id"].get<std::string>();
    auto entry = specials->find(name);
    if (entry == specials->end() || !entry->contains("ids") || !(*entry)["ids"].is_array()) {
      return Status::Error(where + ": special token '" + name + "' has no ids");
    }
    for (const json& id : (*entry)["ids"]) {
      if (!id.is_number_unsigned()) return Status::Error(where + ": ids of '" + name + "' must be token ids");
      (seen_sequence ? frame.suffix : frame.prefix).push_back(static_cast<int32_t>(id.get<uint64_t>()));
    }
  }
  frames.push_back(std::move(frame));
  return Status::Ok();
}

Result<PostProcessor> PostProcessor::FromJson(const json& config) {
  PostProcessor p;
  if (!config.is_null()) DI_RETURN_IF_ERROR(add_frames(config, "post_processor", p.frames_));
  return p;
}

PostProcessor PostProcessor::Wrapping(std::vector<int32_t> prefix, std::vector<int32_t> suffix) {
  PostProcessor p;
  p.frames_.push_back({std::move(prefix), std::move(suffix)});
  return p;
}

void PostProcessor::apply(std::vector<int32_t>& ids) const {
  for (const Frame& frame : frames_) {
    ids.insert(ids.begin(), frame.prefix.begin(), frame.prefix.end());
    ids.insert(ids.end(), frame.suffix.begin(), frame.suffix.end());
  }
}

}  // namespace deepinfer
