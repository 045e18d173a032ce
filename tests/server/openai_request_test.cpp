// Parsing OpenAI request bodies: accepted shapes (from the OpenAI API reference for
// /v1/completions and /v1/chat/completions) and a 400 naming the field for each bad one.
#include "server/openai_request.h"

#include <gtest/gtest.h>

namespace deepinfer {
namespace {

using json = nlohmann::ordered_json;

RequestLimits limits() {
  RequestLimits l;
  l.vocab_size = 1000;
  return l;
}

template <typename T>
const T& ok(const ApiResult<T>& r) {
  if (std::holds_alternative<ApiError>(r)) ADD_FAILURE() << std::get<ApiError>(r).message;
  return std::get<T>(r);
}

template <typename T>
ApiError err(const ApiResult<T>& r) {
  EXPECT_TRUE(std::holds_alternative<ApiError>(r));
  return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
}

TEST(CompletionRequest, PromptShapes) {
  auto one = ok(parse_completion_request(json{{"prompt", "hi"}}, limits()));
  ASSERT_EQ(one.prompts.size(), 1u);
  EXPECT_TRUE(one.prompts[0].is_text);
  EXPECT_EQ(one.options.sampling.max_tokens, 16);  // OpenAI default for completions
  auto many = ok(parse_completion_request(json{{"prompt", {"a", "b"}}}, limits()));
  EXPECT_EQ(many.prompts.size(), 2u);
  auto ids = ok(parse_completion_request(json{{"prompt", {1, 2, 3}}}, limits()));
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_EQ(ids.prompts[0].ids, (std::vector<int32_t>{1, 2, 3}));
  auto lists = ok(parse_completion_request(json{{"prompt", {{1, 2}, {3}}}}, limits()));
  EXPECT_EQ(lists.prompts.size(), 2u);
}

TEST(CompletionRequest, SamplingFieldsAndStops) {
  json body = {{"prompt", "x"}, {"temperature", 0.5}, {"top_p", 0.9}, {"top_k", 40}, {"max_tokens", 7}, {"n", 3},
               {"seed", 11}, {"stop", {"a", "b"}}, {"logprobs", 2}, {"echo", true},
               {"logit_bias", {{"5", -100}}}, {"stream", true}, {"stream_options", {{"include_usage", true}}},
               {"some_unknown_field", {1, 2}}};
  auto r = ok(parse_completion_request(body, limits()));
  EXPECT_FLOAT_EQ(r.options.sampling.temperature, 0.5f);
  EXPECT_EQ(r.options.sampling.top_k, 40);
  EXPECT_EQ(r.options.sampling.max_tokens, 7);
  EXPECT_EQ(r.options.sampling.n, 3);
  EXPECT_EQ(*r.options.sampling.seed, 11u);
  EXPECT_EQ(r.options.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.options.sampling.top_logprobs, 2);
  EXPECT_TRUE(r.echo);
  EXPECT_TRUE(r.options.stream && r.options.include_usage);
  ASSERT_EQ(r.options.sampling.logit_bias.size(), 1u);
  EXPECT_EQ(r.options.sampling.logit_bias[0].first, 5);
}

TEST(CompletionRequest, Errors) {
  EXPECT_EQ(err(parse_completion_request(json::array(), limits())).status, 400);
  EXPECT_EQ(err(parse_completion_request(json{{"max_tokens", 5}}, limits())).param, "prompt");
  EXPECT_EQ(err(parse_completion_request(json{{"prompt", {1, 5000}}}, limits())).param, "prompt");
  EXPECT_EQ(err(parse_completion_request(json{{"prompt", {1, -2}}}, limits())).param, "prompt");
  EXPECT_EQ(err(parse_completion_request(json{{"prompt", json::array()}}, limits())).param, "prompt");
  EXPECT_EQ(err(parse_completion_request(json{{"prompt", 5}}, limits())).param, "prompt");
  EXPECT_EQ(err(parse_completion_request(json{{"prompt", "x"}, {"temperature", "hot"}}, limits())).param, "temperature");
  EXPECT_EQ(err(parse_completion_request(json{{"prompt", "x"}, {"temperature", -1}}, limits())).param, "temperature");
  EXPECT_EQ(err(parse_completion_request(json{{"prompt", "x"}, {"max_tokens", -5}}, limits())).param, "max_tokens");
  EXPECT_EQ(err(parse_completion_request(json{{"prompt", "x"}, {"max_tokens", 1e300}}, limits())).param, "max_tokens");
  EXPECT_EQ(err(parse_completion_request(json{{"prompt", "x"}, {"n", 1000}}, limits())).param, "n");
  EXPECT_EQ(err(parse_completion_request(json{{"prompt", "x"}, {"suffix", "y"}}, limits())).param, "suffix");
  EXPECT_EQ(err(parse_completion_request(json{{"prompt", "x"}, {"logprobs", 50}}, limits())).param, "logprobs");
  EXPECT_EQ(err(parse_completion_request(json{{"prompt", "x"}, {"logit_bias", {{"abc", 1}}}}, limits())).param,
            "logit_bias");
  EXPECT_EQ(err(parse_completion_request(json{{"prompt", "x"}, {"logit_bias", {{"3", 500}}}}, limits())).param,
            "logit_bias");
  json many_stops = {{"prompt", "x"}, {"stop", std::vector<std::string>(5000, "s")}};
  EXPECT_EQ(err(parse_completion_request(many_stops, limits())).param, "stop");
  json long_stop = {{"prompt", "x"}, {"stop", std::string(100000, 'a')}};
  EXPECT_EQ(err(parse_completion_request(long_stop, limits())).param, "stop");
  EXPECT_EQ(err(parse_completion_request(json{{"prompt", "x"}, {"stream", "yes"}}, limits())).param, "stream");
}

TEST(ChatRequest, MessagesAndTools) {
  json body = {{"messages",
                {{{"role", "developer"}, {"content", "be brief"}},
                 {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}},
                 {{"role", "assistant"},
                  {"content", nullptr},
                  {"tool_calls", {{{"id", "c1"}, {"type", "function"}, {"function", {{"name", "f"}, {"arguments", "{}"}}}}}}},
                 {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "42"}}}},
               {"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", json::object()}}}}}},
               {"tool_choice", {{"type", "function"}, {"function", {{"name", "f"}}}}},
               {"max_completion_tokens", 9},
               {"logprobs", true},
               {"top_logprobs", 3},
               {"chat_template_kwargs", {{"thinking", true}}}};
  auto r = ok(parse_chat_request(body, limits()));
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[1]["content"], "a\nb");
  EXPECT_TRUE(r.messages[2]["content"].is_null());
  EXPECT_EQ(r.tool_choice, "function");
  EXPECT_EQ(r.tool_choice_function, "f");
  EXPECT_EQ(r.options.sampling.max_tokens, 9);
  EXPECT_EQ(r.options.sampling.top_logprobs, 3);
  EXPECT_EQ(r.chat_template_kwargs["thinking"], true);
}

TEST(ChatRequest, Errors) {
  EXPECT_EQ(err(parse_chat_request(json{{"messages", json::array()}}, limits())).param, "messages");
  EXPECT_EQ(err(parse_chat_request(json{{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}, limits())).param,
            "messages");
  EXPECT_EQ(err(parse_chat_request(json{{"messages", {{{"role", "user"}}}}}, limits())).param, "messages");
  EXPECT_EQ(err(parse_chat_request(
                    json{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}, {"image_url", "x"}}}}}}}},
                    limits()))
                .param,
            "messages");
  const json msgs = {{{"role", "user"}, {"content", "x"}}};
  EXPECT_EQ(err(parse_chat_request(json{{"messages", msgs}, {"tool_choice", "required"}}, limits())).param, "tool_choice");
  EXPECT_EQ(err(parse_chat_request(json{{"messages", msgs}, {"tools", "f"}}, limits())).param, "tools");
  EXPECT_EQ(err(parse_chat_request(json{{"messages", msgs}, {"top_logprobs", 3}}, limits())).param, "top_logprobs");
  EXPECT_EQ(err(parse_chat_request(json{{"messages", msgs}, {"top_logprobs", 30}, {"logprobs", true}}, limits())).param,
            "top_logprobs");
  EXPECT_EQ(err(parse_chat_request(json{{"messages", msgs}, {"chat_template_kwargs", 3}}, limits())).param,
            "chat_template_kwargs");
  const ApiError e = err(parse_chat_request(json{{"messages", msgs}, {"response_format", {{"type", "yaml"}}}}, limits()));
  EXPECT_EQ(e.to_json()["error"]["param"], "response_format");
  EXPECT_EQ(e.to_json()["error"]["type"], "invalid_request_error");
  EXPECT_TRUE(e.to_json()["error"]["code"].is_null());
}

// Every place the parser reads a "type" (content parts, tools, tool_choice) answers a value of
// another type with a 400 naming the field, never an exception.
TEST(ChatRequest, NonStringTypesAreBadRequestsNotExceptions) {
  const json kinds[] = {5, nullptr, true, json::array({1}), json::object({{"a", 1}}), 1.5, -3};
  for (const json& type : kinds) {
    json part = {{"messages", {{{"role", "user"}, {"content", {{{"type", type}, {"text", "hi"}}}}}}}};
    EXPECT_EQ(err(parse_chat_request(part, limits())).param, "messages") << type.dump();
    json tool = {{"messages", {{{"role", "user"}, {"content", "x"}}}},
                 {"tools", {{{"type", type}, {"function", {{"name", "f"}}}}}}};
    EXPECT_EQ(err(parse_chat_request(tool, limits())).param, "tools") << type.dump();
    json choice = {{"messages", {{{"role", "user"}, {"content", "x"}}}},
                   {"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}},
                   {"tool_choice", {{"type", type}, {"function", {{"name", "f"}}}}}};
    EXPECT_EQ(err(parse_chat_request(choice, limits())).param, "tool_choice") << type.dump();
    // and where a name or text is expected
    json name = {{"messages", {{{"role", "user"}, {"content", "x"}}}},
                 {"tools", {{{"type", "function"}, {"function", {{"name", type}}}}}}};
    EXPECT_EQ(err(parse_chat_request(name, limits())).param, "tools") << type.dump();
    json text = {{"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", type}}}}}}}};
    EXPECT_EQ(err(parse_chat_request(text, limits())).param, "messages") << type.dump();
    json call = {{"messages", {{{"role", "assistant"}, {"content", nullptr},
                                {"tool_calls", {{{"function", {{"name", type}}}}}}}}}};
    EXPECT_EQ(err(parse_chat_request(call, limits())).param, "messages") << type.dump();
    json fn = {{"messages", {{{"role", "user"}, {"content", "x"}}}},
               {"tools", {{{"type", "function"}, {"function", type}}}}};
    EXPECT_EQ(err(parse_chat_request(fn, limits())).param, "tools") << type.dump();
  }
}

// Structured output: response_format, regex and grammar become one OutputConstraint (compiled
// later by GrammarCache); shapes OpenAI does not define, or two constraints, are 400s.
TEST(Requests, OutputConstraints) {
  using Kind = OutputConstraint::Kind;
  const json msgs = {{{"role", "user"}, {"content", "x"}}};
  const json schema = {{"type", "object"}, {"properties", {{"b", {{"type", "integer"}}}, {"a", {{"type", "string"}}}}}};
  auto chat = [&](json extra) {
    json body = {{"messages", msgs}};
    body.update(extra);
    return parse_chat_request(body, limits());
  };
  EXPECT_EQ(ok(chat({{"response_format", {{"type", "text"}}}})).options.constraint.kind, Kind::kNone);
  const auto obj = ok(chat({{"response_format", {{"type", "json_object"}}}})).options.constraint;
  EXPECT_EQ(obj.kind, Kind::kJsonObject);
  EXPECT_EQ(obj.param, "response_format");
  const auto js = ok(chat({{"response_format", {{"type", "json_schema"},
                                                 {"json_schema", {{"name", "n"}, {"schema", schema}, {"strict", true}}}}}}))
                      .options.constraint;
  EXPECT_EQ(js.kind, Kind::kJsonSchema);
  EXPECT_EQ(js.text, schema.dump());  // key order kept: properties come out in declared order
  const auto re = ok(parse_completion_request(json{{"prompt", "x"}, {"regex", "[a-z]+"}}, limits())).options.constraint;
  EXPECT_EQ(re.kind, Kind::kRegex);
  EXPECT_EQ(re.text, "[a-z]+");
  EXPECT_EQ(re.param, "regex");
  EXPECT_EQ(ok(chat({{"grammar", "root ::= \"a\""}})).options.constraint.kind, Kind::kGrammar);

  EXPECT_EQ(err(chat({{"response_format", "json"}})).param, "response_format");
  EXPECT_EQ(err(chat({{"response_format", {{"type", "json_schema"}}}})).param, "response_format");
  EXPECT_EQ(err(chat({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"name", "n"}}}}}})).param,
            "response_format");
  EXPECT_EQ(err(chat({{"response_format", {{"type", "json_schema"}, {"json_schema", {{"schema", 3}}}}}})).param,
            "response_format");
  EXPECT_EQ(err(chat({{"regex", 5}})).param, "regex");
  EXPECT_EQ(err(chat({{"grammar", json::array()}})).param, "grammar");
  const ApiError two = err(chat({{"response_format", {{"type", "json_object"}}}, {"regex", "a"}}));
  EXPECT_NE(two.message.find("at most one"), std::string::npos) << two.message;

  const json strict_tool = {{"type", "function"}, {"function", {{"name", "f"}, {"strict", true}}}};
  ok(chat({{"tools", {strict_tool}}}));  // constrains the tool calls (server/tool_call_grammar.h)
  const ApiError strict = err(chat({{"tools", {strict_tool}}, {"regex", "a"}}));
  EXPECT_EQ(strict.param, "tools");
  EXPECT_NE(strict.message.find("tools[0].function.strict"), std::string::npos) << strict.message;
  ok(chat({{"tools", {strict_tool}}, {"tool_choice", "none"}, {"regex", "a"}}));  // tools unused: no conflict
  // response_format constrains the text besides strict tools' calls, also where a call is forced.
  ok(chat({{"tools", {strict_tool}}, {"response_format", {{"type", "json_object"}}}}));
  ok(chat({{"tools", {strict_tool}}, {"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}}));
  const json bad_strict = {{"type", "function"}, {"function", {{"name", "f"}, {"strict", "yes"}}}};
  EXPECT_NE(err(chat({{"tools", {bad_strict}}})).message.find("'tools[0].function.strict' must be true or false"),
            std::string::npos);
  const json loose_tool = {{"type", "function"}, {"function", {{"name", "f"}, {"strict", false}}}};
  ok(chat({{"tools", {loose_tool}}}));
  EXPECT_EQ(err(chat({{"tools", {loose_tool}}, {"tool_choice", "required"}, {"regex", "a"}})).param, "tool_choice");
  EXPECT_EQ(err(chat({{"tools", {loose_tool}}, {"tool_choice", "required"}, {"response_format", {{"type", "json_object"}}}}))
                .param,
            "tool_choice");
}

// Every top-level field with every JSON type: an answer (accepted or a 400), never an exception.
TEST(Requests, EveryFieldWithEveryTypeNeverThrows) {
  const char* fields[] = {"model", "prompt", "messages", "stream", "stream_options", "n", "temperature", "top_p",
                          "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty",
                          "min_tokens", "ignore_eos", "seed", "logit_bias", "stop_token_ids", "stop", "user",
                          "response_format", "best_of", "max_tokens", "max_completion_tokens", "echo", "logprobs",
                          "top_logprobs", "suffix", "add_generation_prompt", "chat_template_kwargs", "tools",
                          "tool_choice", "regex", "grammar"};
  const json values[] = {nullptr, true, false, 0, -1, 1e308, 18446744073709551615ull, "s", json::array(),
                         json::array({1, "a"}), json::object(), json::object({{"type", 5}, {"text", nullptr}})};
  for (const char* field : fields) {
    for (const json& v : values) {
      json completion = {{"prompt", "x"}};
      completion[field] = v;
      json chat = {{"messages", {{{"role", "user"}, {"content", "x"}}}}};
      chat[field] = v;
      EXPECT_NO_THROW(parse_completion_request(completion, limits())) << field << " " << v.dump();
      EXPECT_NO_THROW(parse_chat_request(chat, limits())) << field << " " << v.dump();
    }
  }
}

}  // namespace
}  // namespace deepinfer
