#include "bench/openai_stream.h"

namespace deepinfer::bench {

using nlohmann::json;

std::string make_request_body(const TurnRequest& request, const ApiOptions& api) {
  json body = {{"model", api.model},
               {"max_tokens", request.n_tokens_out},
               {"temperature", api.temperature},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (api.ignore_eos) body["ignore_eos"] = true;
  if (api.chat) {
    json messages = json::array();
    for (const Message& m : request.messages) messages.push_back({{"role", m.role}, {"content", m.content}});
    body["messages"] = std::move(messages);
  } else {
    body["prompt"] = flatten_prompt(request.messages);
  }
  body.update(api.extra_body);
  return body.dump();
}

namespace {

bool non_empty_string(const json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() && !it->get_ref<const std::string&>().empty();
}

// Whether a choice carries output: completion text, chat content, reasoning, or a tool call.
bool carries_output(const json& choice) {
  if (non_empty_string(choice, "text")) return true;
  auto delta = choice.find("delta");
  if (delta == choice.end() || !delta->is_object()) return false;
  if (non_empty_string(*delta, "content") || non_empty_string(*delta, "reasoning_content") ||
      non_empty_string(*delta, "reasoning")) {
    return true;
  }
  auto tool_calls = delta->find("tool_calls");
  return tool_calls != delta->end() && tool_calls->is_array() && !tool_calls->empty();
}

}  // namespace

void StreamReader::on_body(std::string_view bytes, double t_s) {
  sse_.feed(bytes, events_);
  for (const std::string& data : events_) on_event(data, t_s);
  events_.clear();
}

void StreamReader::on_event(const std::string& data, double t_s) {
  if (done_ || !error_.empty()) return;
  if (data == "[DONE]") {
    done_ = true;
    return;
  }
  json chunk = json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (chunk.is_discarded() || !chunk.is_object()) {
    error_ = "bad_stream";
    error_detail_ = "not a JSON object: " + data.substr(0, 200);
    return;
  }
  if (auto err = chunk.find("error"); err != chunk.end() && !err->is_null()) {
    error_ = "stream_error";
    error_detail_ = err->dump().substr(0, 500);
    return;
  }
  if (auto choices = chunk.find("choices"); choices != chunk.end() && choices->is_array()) {
    for (const json& choice : *choices) {
      if (choice.is_object() && carries_output(choice)) {
        chunk_times_s_.push_back(t_s);
        break;
      }
    }
  }
  if (auto usage = chunk.find("usage"); usage != chunk.end() && usage->is_object()) {
    n_prompt_tokens_ = usage->value("prompt_tokens", n_prompt_tokens_);
    n_completion_tokens_ = usage->value("completion_tokens", n_completion_tokens_);
  }
}

void StreamReader::finish(RequestRecord& record, int64_t n_tokens_in_intended) {
  record.chunk_times_s = std::move(chunk_times_s_);
  record.usage_reported = n_completion_tokens_ >= 0;
  record.n_tokens_in = n_prompt_tokens_ >= 0 ? n_prompt_tokens_ : n_tokens_in_intended;
  record.n_tokens_out = record.usage_reported ? n_completion_tokens_ : static_cast<int64_t>(record.chunk_times_s.size());
  if (!record.ok()) return;
  if (!error_.empty()) {
    record.error = error_;
    record.error_detail = error_detail_;
  } else if (!done_) {
    record.error = sse_.pending() ? "bad_stream" : "incomplete";
    record.error_detail = "the stream ended without data: [DONE]";
  } else if (record.chunk_times_s.empty()) {
    record.error = "no_output";
    record.error_detail = "the stream carried no output text";
  }
}

}  // namespace deepinfer::bench
