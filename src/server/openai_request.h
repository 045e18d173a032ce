// OpenAI request bodies (/v1/completions, /v1/chat/completions) parsed into native types, with
// every field type- and range-checked. A bad field gives an ApiError naming it (`param`).
// Unknown fields are ignored, as OpenAI clients send extras.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/sampling_params.h"

namespace deepinfer {

// An error in OpenAI's shape: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // empty: null
  std::string code;   // empty: null
  nlohmann::json to_json() const;
};

template <typename T>
using ApiResult = std::variant<T, ApiError>;

struct RequestLimits {
  int max_n = 16;                 // samples per prompt
  int max_stop_strings = 16;
  size_t max_stop_bytes = 512;    // each stop string
  int max_prompts = 256;          // prompts in one /v1/completions request
  int max_logit_bias = 2048;      // entries
  int vocab_size = 0;             // token ids must be below this
};

// A structured-output constraint as the request states it (compiled by GrammarCache): at most
// one per request, from `response_format` (json_object, json_schema), or the extension fields
// `regex` (whole-output match, docs/grammar.md's dialect) and `grammar` (docs/grammar.md's EBNF),
// or, set by the server once the chat format is known, strict tools (server/tool_call_grammar.h).
struct OutputConstraint {
  enum class Kind { kNone, kJsonObject, kJsonSchema, kRegex, kGrammar, kToolCalls };
  Kind kind = Kind::kNone;
  std::string text;   // the schema as JSON text, the pattern, the grammar or the tool-call constraint text; empty for json_object
  std::string param;  // the request field it came from, for errors: response_format, regex, grammar, tools
};

// What both endpoints share.
struct GenerationOptions {
  std::string model;
  bool stream = false;
  bool include_usage = false;      // stream_options.include_usage
  SamplingParams sampling;         // max_tokens 0: up to the context
  std::vector<std::string> stop;   // stop strings
  std::string user;
  OutputConstraint constraint;     // sampling.constraint is set from it once compiled
};

struct PromptInput {
  bool is_text = true;
  std::string text;                // when is_text
  std::vector<int32_t> ids;        // otherwise
};

struct CompletionRequest {
  GenerationOptions options;
  std::vector<PromptInput> prompts;
  bool echo = false;
};

struct ChatRequest {
  GenerationOptions options;
  nlohmann::ordered_json messages;      // normalized: content is a string (text parts joined) or null
  nlohmann::ordered_json tools;         // array or null (key order kept: templates print schemas)
  std::string tool_choice = "auto";     // auto, none, required, function
  std::string tool_choice_function;     // for "function"
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  std::string reasoning_effort;         // "" when absent or null (DeepSeek-V4 maps it to thinking mode)
  bool add_generation_prompt = true;
};

ApiResult<CompletionRequest> parse_completion_request(const nlohmann::ordered_json& body, const RequestLimits& limits);
ApiResult<ChatRequest> parse_chat_request(const nlohmann::ordered_json& body, const RequestLimits& limits);

}  // namespace deepinfer
