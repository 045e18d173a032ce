// DeepSeek-V4 chat in the server: OpenAI request bodies through parse_chat_request and
// render_deepseek_v4_chat must give the prompts DeepSeek's own encoder wrote
// (tests/data/chat/deepseek-v4/golden.jsonl, the team fixture; the bodies say in OpenAI's terms
// what the golden lines say in the encoder's), and ChatOutput must split V4 answers into
// reasoning, content and OpenAI tool calls (DeepSeek's DSML format, as the goldens' parse cases).
#include "server/deepseek_v4_chat.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "server/chat_output.h"

namespace deepinfer {
namespace {

using ojson = nlohmann::ordered_json;

std::map<std::string, ojson> golden_by_name() {
  std::map<std::string, ojson> rows;
  std::ifstream in("tests/data/chat/deepseek-v4/golden.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    ojson row = ojson::parse(line);
    rows[row["name"]] = row;
  }
  return rows;
}

ApiResult<DeepseekV4Chat> render(const ojson& body) {
  auto parsed = parse_chat_request(body, RequestLimits{});
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  return render_deepseek_v4_chat(std::get<ChatRequest>(parsed));
}

std::string prompt_of(const ojson& body) {
  auto r = render(body);
  if (auto* e = std::get_if<ApiError>(&r)) return "error: " + e->message;
  return std::get<DeepseekV4Chat>(r).prompt;
}

TEST(DeepseekV4Chat, RequestsRenderAsDeepSeeksEncoder) {
  auto golden = golden_by_name();
  // Tools as a request carries them (the golden puts them on an empty system message).
  ojson row = golden["parallel_tool_calls_results_reordered_chat"];
  ojson messages = row["messages"];
  ojson body = {{"messages", ojson(messages.begin() + 1, messages.end())}, {"tools", messages[0]["tools"]}};
  EXPECT_EQ(prompt_of(body), row["rendered"].get<std::string>());

  row = golden["tool_call_result_answer_thinking"];
  messages = row["messages"];
  ojson system = messages[0];
  system.erase("tools");
  messages[0] = system;
  body = {{"messages", messages}, {"tools", row["messages"][0]["tools"]}, {"chat_template_kwargs", {{"thinking", true}}}};
  EXPECT_EQ(prompt_of(body), row["rendered"].get<std::string>());

  row = golden["reasoning_effort_max"];
  EXPECT_EQ(prompt_of({{"messages", row["messages"]}, {"reasoning_effort", "max"}}), row["rendered"].get<std::string>());

  row = golden["multi_turn_thinking_keep_reasoning"];
  body = {{"messages", row["messages"]}, {"chat_template_kwargs", {{"thinking", true}, {"drop_thinking", false}}}};
  EXPECT_EQ(prompt_of(body), row["rendered"].get<std::string>());

  row = golden["single_user_chat"];
  body = {{"messages", row["messages"]}, {"reasoning_effort", "high"}, {"chat_template_kwargs", {{"thinking", false}}}};
  EXPECT_EQ(prompt_of(body), row["rendered"].get<std::string>());
}

TEST(DeepseekV4Chat, ToolChoice) {
  const ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "f", "parameters": {}}}])");
  const ojson messages = ojson::parse(R"([{"role": "user", "content": "hi"}])");
  auto forced = [&](const ojson& choice) {
    auto r = render({{"messages", messages}, {"tools", tools}, {"tool_choice", choice}});
    return std::get<DeepseekV4Chat>(r);
  };
  EXPECT_EQ(forced("auto").forced_prefix, "");
  EXPECT_EQ(forced("required").forced_prefix, "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"");
  EXPECT_EQ(forced(ojson{{"type", "function"}, {"function", {{"name", "f"}}}}).forced_prefix,
            "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n");
  const DeepseekV4Chat none = forced("none");
  EXPECT_EQ(none.forced_prefix, "");
  EXPECT_EQ(none.prompt, "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜></think>");  // no tools section
}

TEST(DeepseekV4Chat, BadInputIsA400NamingTheField) {
  auto param_of = [](const ojson& body) {
    auto r = render(body);
    auto* e = std::get_if<ApiError>(&r);
    return e ? e->param + ": " + e->message : std::string("(no error)");
  };
  const ojson user = {{"role", "user"}, {"content", "x"}};
  const ojson call = ojson::parse(R"({"role": "assistant", "content": "", "tool_calls": [
    {"id": "c0", "type": "function", "function": {"name": "f", "arguments": "{oops"}}]})");
  EXPECT_EQ(param_of({{"messages", {user, call}}}), "messages: messages[1]: tool_calls[0].function.arguments is not valid JSON");
  const ojson orphan = {{"role", "tool"}, {"content", "1"}, {"tool_call_id", "c9"}};
  EXPECT_EQ(param_of({{"messages", {user, orphan}}}),
            "messages: a tool message answers no tool call: no assistant tool_calls before it");
  EXPECT_EQ(param_of({{"messages", {user}}, {"reasoning_effort", "extreme"}}).substr(0, 18), "reasoning_effort: ");
  EXPECT_EQ(param_of({{"messages", {user}}, {"chat_template_kwargs", {{"thinking", 1}}}}).substr(0, 22),
            "chat_template_kwargs: ");
}

ChatDelta run_all(ChatOutput& out, const std::string& text, size_t piece) {
  ChatDelta all;
  auto add = [&](ChatDelta d) {
    all.content += d.content;
    all.reasoning += d.reasoning;
    for (auto& t : d.tool_calls) all.tool_calls.push_back(t);
  };
  for (size_t i = 0; i < text.size(); i += piece) add(out.push(text.substr(i, piece)));
  add(out.finish());
  return all;
}

TEST(DeepseekV4Chat, OutputReasoningAndDsmlCalls) {
  // golden.jsonl p_thinking_tool_call, without the end of sentence (the detokenizer drops it).
  const std::string text =
      "Use the tool.</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
      "<｜DSML｜parameter name=\"location\" string=\"true\">Beijing</｜DSML｜parameter>\n"
      "<｜DSML｜parameter name=\"unit\" string=\"true\">celsius</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>";
  for (size_t piece : {1, 5, 1000}) {
    ChatOutputConfig config;
    config.parse_reasoning = config.reasoning_open = config.parse_tool_calls = config.deepseek_v4 = true;
    ChatOutput out(config);
    ChatDelta d = run_all(out, text, piece);
    EXPECT_EQ(d.reasoning, "Use the tool.");
    EXPECT_EQ(d.content, "");
    ASSERT_EQ(d.tool_calls.size(), 1u);
    EXPECT_EQ(d.tool_calls[0]["index"], 0);
    EXPECT_EQ(d.tool_calls[0]["type"], "function");
    EXPECT_EQ(d.tool_calls[0]["function"]["name"], "get_weather");
    EXPECT_EQ(d.tool_calls[0]["function"]["arguments"], "{\"location\": \"Beijing\", \"unit\": \"celsius\"}");
    EXPECT_TRUE(out.saw_tool_calls());
  }
}

TEST(DeepseekV4Chat, OutputAfterForcedOpening) {
  ChatOutputConfig config;
  config.parse_tool_calls = config.deepseek_v4 = true;
  config.forced_prefix = "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n";
  ChatOutput out(config);
  ChatDelta d = run_all(out, "<｜DSML｜parameter name=\"n\" string=\"false\">2</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>", 3);
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0]["function"]["arguments"], "{\"n\": 2}");

  ChatOutput chat(config);  // a model that does not finish the call: its text, and no call half-sent
  d = run_all(chat, "oops", 2);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_FALSE(chat.saw_tool_calls());
}

}  // namespace
}  // namespace deepinfer
