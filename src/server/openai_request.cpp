#include "server/openai_request.h"

#include <cmath>
#include <optional>
#include <set>

#include "server/request_json.h"

namespace deepinfer {
namespace {

using json = nlohmann::ordered_json;

ApiError bad(const std::string& param, const std::string& message) {
  ApiError e;
  e.param = param;
  e.message = message;
  return e;
}

// Typed access to optional fields of the request body; the first error is kept.
class Fields {
 public:
  explicit Fields(const json& body) : body_(body) {}
  bool ok() const { return !error_; }
  const ApiError& error() const { return *error_; }
  void fail(const std::string& param, const std::string& message) {
    if (!error_) error_ = bad(param, message);
  }

  const json* get(const char* key) const {
    auto it = body_.find(key);
    return it == body_.end() || it->is_null() ? nullptr : &*it;
  }
  void number(const char* key, float& out, double lo, double hi) {
    const json* v = get(key);
    if (!v) return;
    if (!v->is_number()) return fail(key, std::string("'") + key + "' must be a number");
    const double d = v->get<double>();
    if (!(d >= lo && d <= hi))
      return fail(key, std::string("'") + key + "' must be between " + fmt(lo) + " and " + fmt(hi) + ", got " + fmt(d));
    out = float(d);
  }
  void integer(const char* key, int& out, int64_t lo, int64_t hi) {
    const json* v = get(key);
    if (!v) return;
    if (!v->is_number_integer()) return fail(key, std::string("'") + key + "' must be an integer");
    const int64_t i = v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : v->get<int64_t>();
    if (i < lo || i > hi)
      return fail(key, std::string("'") + key + "' must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                           ", got " + v->dump());
    out = int(i);
  }
  void boolean(const char* key, bool& out) {
    const json* v = get(key);
    if (!v) return;
    if (!v->is_boolean()) return fail(key, std::string("'") + key + "' must be true or false");
    out = v->get<bool>();
  }
  void string(const char* key, std::string& out) {
    const json* v = get(key);
    if (!v) return;
    if (!v->is_string()) return fail(key, std::string("'") + key + "' must be a string");
    out = v->get<std::string>();
  }

  static std::string fmt(double d) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", d);
    return buf;
  }

 private:
  const json& body_;
  std::optional<ApiError> error_;
};

// response_format {"type": "text" | "json_object" | "json_schema", "json_schema": {"name",
// "schema", "strict"}}, and the extensions "regex" and "grammar": at most one constraint.
// json_schema constrains to the schema as written whether or not "strict" is set.
void parse_constraint(Fields& f, OutputConstraint& c) {
  using Kind = OutputConstraint::Kind;
  int n_given = 0;
  if (const json* rf = f.get("response_format")) {
    const std::optional<std::string> type = rf->is_object() ? string_member(*rf, "type") : std::nullopt;
    if (!type) return f.fail("response_format", "'response_format' must be an object with a string 'type'");
    if (*type == "json_object") {
      c.kind = Kind::kJsonObject;
    } else if (*type == "json_schema") {
      const json* js = find_member(*rf, "json_schema");
      if (!js || !js->is_object())
        return f.fail("response_format", "'response_format.json_schema' must be an object with 'name' and 'schema'");
      const json* name = find_member(*js, "name");
      if (name && !name->is_string()) return f.fail("response_format", "'response_format.json_schema.name' must be a string");
      const json* strict = find_member(*js, "strict");
      if (strict && !strict->is_null() && !strict->is_boolean())
        return f.fail("response_format", "'response_format.json_schema.strict' must be true or false");
      const json* schema = find_member(*js, "schema");
      if (!schema || !(schema->is_object() || schema->is_boolean()))
        return f.fail("response_format", "'response_format.json_schema.schema' must be a JSON Schema (an object)");
      c.kind = Kind::kJsonSchema;
      c.text = schema->dump();
    } else if (*type != "text") {
      return f.fail("response_format", "'response_format.type' must be text, json_object or json_schema, got '" + *type + "'");
    }
    if (c.kind != Kind::kNone) {
      c.param = "response_format";
      ++n_given;
    }
  }
  for (const auto& [key, kind] : {std::pair{"regex", Kind::kRegex}, std::pair{"grammar", Kind::kGrammar}}) {
    const json* v = f.get(key);
    if (!v) continue;
    if (!v->is_string()) return f.fail(key, std::string("'") + key + "' must be a string");
    c = {kind, v->get<std::string>(), key};
    ++n_given;
  }
  if (n_given > 1)
    f.fail(c.param, "at most one of 'response_format' (json_object or json_schema), 'regex' and 'grammar' may be given");
}

// Fields common to both endpoints.
void parse_options(Fields& f, const RequestLimits& limits, GenerationOptions& o) {
  f.string("model", o.model);
  f.boolean("stream", o.stream);
  if (const json* so = f.get("stream_options")) {
    if (!so->is_object()) f.fail("stream_options", "'stream_options' must be an object");
    else if (so->contains("include_usage") && !(*so)["include_usage"].is_null()) {
      if (!(*so)["include_usage"].is_boolean()) f.fail("stream_options", "'stream_options.include_usage' must be true or false");
      else o.include_usage = (*so)["include_usage"].get<bool>();
    }
  }
  SamplingParams& s = o.sampling;
  f.integer("n", s.n, 1, limits.max_n);
  f.number("temperature", s.temperature, 0.0, 100.0);
  f.number("top_p", s.top_p, 1e-9, 1.0);
  int top_k = 0;
  f.integer("top_k", top_k, -1, std::max(1, limits.vocab_size));
  s.top_k = top_k < 0 ? 0 : top_k;
  f.number("min_p", s.min_p, 0.0, 1.0);
  f.number("presence_penalty", s.presence_penalty, -2.0, 2.0);
  f.number("frequency_penalty", s.frequency_penalty, -2.0, 2.0);
  f.number("repetition_penalty", s.repetition_penalty, 1e-6, 100.0);
  f.integer("min_tokens", s.min_tokens, 0, 1 << 24);
  f.boolean("ignore_eos", s.ignore_eos);
  if (const json* seed = f.get("seed")) {
    if (!seed->is_number_integer()) f.fail("seed", "'seed' must be an integer");
    else s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>() : uint64_t(seed->get<int64_t>());
  }
  if (const json* lb = f.get("logit_bias")) {
    if (!lb->is_object()) f.fail("logit_bias", "'logit_bias' must be an object of token id to bias");
    else if (int(lb->size()) > limits.max_logit_bias)
      f.fail("logit_bias", "'logit_bias' has more than " + std::to_string(limits.max_logit_bias) + " entries");
    else
      for (auto it = lb->begin(); it != lb->end(); ++it) {
        char* end = nullptr;
        const long id = std::strtol(it.key().c_str(), &end, 10);
        if (it.key().empty() || *end != '\0' || id < 0 || id >= limits.vocab_size) {
          f.fail("logit_bias", "'logit_bias' key '" + it.key() + "' is not a token id of this model");
          break;
        }
        if (!it->is_number() || !(std::fabs(it->get<double>()) <= 100.0)) {
          f.fail("logit_bias", "'logit_bias' values must be numbers between -100 and 100");
          break;
        }
        s.logit_bias.emplace_back(int32_t(id), float(it->get<double>()));
      }
  }
  if (const json* st = f.get("stop_token_ids")) {
    if (!st->is_array() || st->size() > 1024) f.fail("stop_token_ids", "'stop_token_ids' must be a list of token ids");
    else
      for (const auto& id : *st) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= limits.vocab_size) {
          f.fail("stop_token_ids", "'stop_token_ids' holds " + id.dump() + ", which is not a token id of this model");
          break;
        }
        s.stop_token_ids.push_back(id.get<int32_t>());
      }
  }
  if (const json* stop = f.get("stop")) {
    std::vector<std::string> stops;
    if (stop->is_string()) stops.push_back(stop->get<std::string>());
    else if (stop->is_array()) {
      if (int(stop->size()) > limits.max_stop_strings)
        return f.fail("stop", "'stop' has " + std::to_string(stop->size()) + " strings; at most " +
                                  std::to_string(limits.max_stop_strings) + " are allowed");
      for (const auto& x : *stop) {
        if (!x.is_string()) return f.fail("stop", "'stop' must be a string or a list of strings");
        stops.push_back(x.get<std::string>());
      }
    } else {
      return f.fail("stop", "'stop' must be a string or a list of strings");
    }
    for (const auto& x : stops)
      if (x.size() > limits.max_stop_bytes)
        return f.fail("stop", "a 'stop' string is longer than " + std::to_string(limits.max_stop_bytes) + " bytes");
    o.stop = std::move(stops);
  }
  f.string("user", o.user);
  parse_constraint(f, o.constraint);
  if (const json* bo = f.get("best_of")) {
    if (!bo->is_number_integer() || bo->get<int64_t>() != s.n)
      f.fail("best_of", "'best_of' is not supported (only best_of equal to n)");
  }
}

void parse_max_tokens(Fields& f, SamplingParams& s, const char* key) {
  int v = 0;
  f.integer(key, v, 1, 1 << 24);
  if (f.get(key)) s.max_tokens = v;
}

// obj.function.name, when obj is {"function": {"name": "...", ...}, ...}.
std::optional<std::string> function_name(const json& obj) {
  const json* fn = find_member(obj, "function");
  return fn ? string_member(*fn, "name") : std::nullopt;
}

// A list of token ids, each inside the vocabulary.
bool parse_ids(const json& arr, int vocab_size, std::vector<int32_t>& out, std::string& error) {
  for (const auto& x : arr) {
    if (!x.is_number_integer()) {
      error = "token ids must be integers";
      return false;
    }
    const int64_t id = x.is_number_unsigned() && x.get<uint64_t>() > uint64_t(INT64_MAX) ? -1 : x.get<int64_t>();
    if (id < 0 || id >= vocab_size) {
      error = "token id " + x.dump() + " is outside the vocabulary [0, " + std::to_string(vocab_size) + ")";
      return false;
    }
    out.push_back(int32_t(id));
  }
  return true;
}

}  // namespace

nlohmann::json ApiError::to_json() const {
  using nlohmann::json;
  return {{"error",
           {{"message", message},
            {"type", type},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", code.empty() ? json(nullptr) : json(code)}}}};
}

ApiResult<CompletionRequest> parse_completion_request(const json& body, const RequestLimits& limits) {
  if (!body.is_object()) return bad("", "the request body must be a JSON object");
  CompletionRequest r;
  Fields f(body);
  r.options.sampling.max_tokens = 16;  // OpenAI's default for completions
  parse_options(f, limits, r.options);
  parse_max_tokens(f, r.options.sampling, "max_tokens");
  f.boolean("echo", r.echo);
  if (const json* lp = f.get("logprobs")) {
    if (!lp->is_number_integer() || lp->get<int64_t>() < 0 || lp->get<int64_t>() > 20)
      f.fail("logprobs", "'logprobs' must be an integer between 0 and 20");
    else {
      r.options.sampling.logprobs = true;
      r.options.sampling.top_logprobs = lp->get<int>();
    }
  }
  if (const json* sfx = f.get("suffix")) {
    if (!sfx->is_string() || !sfx->get<std::string>().empty())
      f.fail("suffix", "'suffix' (fill-in-the-middle) is not supported by this model");
  }
  if (!f.ok()) return f.error();

  const json* prompt = f.get("prompt");
  if (!prompt) return bad("prompt", "'prompt' is required");
  auto add_ids = [&](const json& arr) -> std::optional<ApiError> {
    PromptInput p;
    p.is_text = false;
    std::string error;
    if (!parse_ids(arr, limits.vocab_size, p.ids, error)) return bad("prompt", "'prompt': " + error);
    if (p.ids.empty()) return bad("prompt", "'prompt' must not be an empty list of token ids");
    r.prompts.push_back(std::move(p));
    return std::nullopt;
  };
  if (prompt->is_string()) {
    r.prompts.push_back({true, prompt->get<std::string>(), {}});
  } else if (prompt->is_array()) {
    if (prompt->empty()) return bad("prompt", "'prompt' must not be empty");
    if (int(prompt->size()) > limits.max_prompts && !(*prompt)[0].is_number_integer())
      return bad("prompt", "'prompt' holds more than " + std::to_string(limits.max_prompts) + " prompts");
    if ((*prompt)[0].is_number_integer()) {
      if (auto e = add_ids(*prompt)) return *e;
    } else {
      for (const auto& p : *prompt) {
        if (p.is_string()) r.prompts.push_back({true, p.get<std::string>(), {}});
        else if (p.is_array()) {
          if (auto e = add_ids(p)) return *e;
        } else {
          return bad("prompt", "'prompt' must be a string, a list of strings, a list of token ids, or a list of such lists");
        }
      }
    }
  } else {
    return bad("prompt", "'prompt' must be a string, a list of strings, a list of token ids, or a list of such lists");
  }
  return r;
}

ApiResult<ChatRequest> parse_chat_request(const json& body, const RequestLimits& limits) {
  if (!body.is_object()) return bad("", "the request body must be a JSON object");
  ChatRequest r;
  Fields f(body);
  parse_options(f, limits, r.options);
  parse_max_tokens(f, r.options.sampling, "max_tokens");
  parse_max_tokens(f, r.options.sampling, "max_completion_tokens");
  f.boolean("logprobs", r.options.sampling.logprobs);
  f.integer("top_logprobs", r.options.sampling.top_logprobs, 0, 20);
  if (r.options.sampling.top_logprobs > 0 && !r.options.sampling.logprobs)
    f.fail("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  f.boolean("add_generation_prompt", r.add_generation_prompt);
  if (const json* kw = f.get("chat_template_kwargs")) {
    if (!kw->is_object()) f.fail("chat_template_kwargs", "'chat_template_kwargs' must be an object");
    else r.chat_template_kwargs = *kw;
  }
  if (const json* effort = f.get("reasoning_effort"); effort && !effort->is_null()) f.string("reasoning_effort", r.reasoning_effort);
  if (!f.ok()) return f.error();

  const json* messages = f.get("messages");
  if (!messages || !messages->is_array() || messages->empty())
    return bad("messages", "'messages' must be a non-empty list");
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool"};
  r.messages = json::array();
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad("messages", where + " must be an object");
    auto role = m.find("role");
    if (role == m.end() || !role->is_string() || !kRoles.count(role->get<std::string>()))
      return bad("messages", where + ".role must be one of system, developer, user, assistant, tool");
    json out = m;
    if (*role == "developer") out["role"] = "system";
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      if (*role != "assistant") return bad("messages", where + ".content is required");
      out["content"] = nullptr;
    } else if (content->is_array()) {
      std::string text;
      for (const auto& part : *content) {
        const std::optional<std::string> type = string_member(part, "type");
        const std::optional<std::string> part_text = string_member(part, "text");
        if (type != "text" || !part_text)
          return bad("messages", where + ".content parts must be {\"type\": \"text\", \"text\": ...}; other part types are not supported");
        if (!text.empty()) text += "\n";
        text += *part_text;
      }
      out["content"] = text;
    } else if (!content->is_string()) {
      return bad("messages", where + ".content must be a string or a list of text parts");
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      if (*role != "assistant" || !m["tool_calls"].is_array())
        return bad("messages", where + ".tool_calls must be a list on an assistant message");
      for (const auto& tc : m["tool_calls"])
        if (!function_name(tc))
          return bad("messages", where + ".tool_calls entries need function.name");
    }
    r.messages.push_back(std::move(out));
  }

  if (const json* tools = f.get("tools")) {
    if (!tools->is_array()) return bad("tools", "'tools' must be a list");
    for (const auto& t : *tools)
      if (string_member(t, "type") != "function" || !function_name(t))
        return bad("tools", "each tool must be {\"type\": \"function\", \"function\": {\"name\": ..., ...}}");
    if (!tools->empty()) r.tools = *tools;
  }
  if (const json* tc = f.get("tool_choice")) {
    if (tc->is_string()) {
      const std::string v = tc->get<std::string>();
      if (v != "auto" && v != "none" && v != "required")
        return bad("tool_choice", "'tool_choice' must be auto, none, required, or a named function");
      r.tool_choice = v;
    } else if (string_member(*tc, "type") == "function" && function_name(*tc)) {
      r.tool_choice = "function";
      r.tool_choice_function = *function_name(*tc);
      bool found = false;
      if (r.tools.is_array())
        for (const auto& t : r.tools) found |= function_name(t) == r.tool_choice_function;
      if (!found) return bad("tool_choice", "'tool_choice' names function '" + r.tool_choice_function + "', which is not in 'tools'");
    } else {
      return bad("tool_choice", "'tool_choice' must be auto, none, required, or a named function");
    }
    if ((r.tool_choice == "required") && r.tools.is_null())
      return bad("tool_choice", "'tool_choice' is required but no 'tools' were given");
  }
  // Strict tools constrain the answer's tool calls (server/tool_call_grammar.h) and, with
  // response_format, its text besides them; regex and grammar cannot share the answer with them.
  using Kind = OutputConstraint::Kind;
  const Kind kind = r.options.constraint.kind;
  std::optional<size_t> strict_tool;
  if (r.tools.is_array())
    for (size_t i = 0; i < r.tools.size(); ++i) {
      const json* strict = find_member(*find_member(r.tools[i], "function"), "strict");
      if (strict && !strict->is_null() && !strict->is_boolean())
        return bad("tools", "'tools[" + std::to_string(i) + "].function.strict' must be true or false");
      if (strict && strict->is_boolean() && strict->get<bool>() && r.tool_choice != "none" && !strict_tool)
        strict_tool = i;
    }
  if (strict_tool && (kind == Kind::kRegex || kind == Kind::kGrammar))
    return bad("tools", "tools[" + std::to_string(*strict_tool) + "].function.strict constrains the tool calls, so '" +
                            r.options.constraint.param + "' cannot constrain the same answer (response_format can)");
  if (kind != Kind::kNone && !strict_tool && (r.tool_choice == "required" || r.tool_choice == "function"))
    return bad("tool_choice", "'" + r.options.constraint.param + "' constrains the answer's text, so 'tool_choice' "
                              "cannot force a tool call in the same request");
  return r;
}

}  // namespace deepinfer
