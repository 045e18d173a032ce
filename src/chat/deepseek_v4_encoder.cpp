// The pipeline of encoding_dsv4.py's encode_messages: messages are checked and converted to
// Turn values, tool messages merged into user turns, tool results sorted by call order, earlier
// reasoning dropped, then each turn rendered with the tokens its successor calls for.
#include "chat/deepseek_v4_encoder.h"

#include <algorithm>
#include <array>
#include <map>
#include <utility>
#include <vector>

#include "chat/deepseek_v4_markup.h"
#include "chat/py_json.h"

namespace deepinfer::chat {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kReasoningEffortMax =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to resolve the root "
    "cause, rigorously stress-testing your logic against all potential paths, edge cases, and adversarial "
    "scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate step, considered "
    "alternative, and rejected hypothesis to ensure absolutely no assumption is left unchecked.\n\n";

constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kTaskTokens = {{
    {"action", "<｜action｜>"},
    {"query", "<｜query｜>"},
    {"authority", "<｜authority｜>"},
    {"domain", "<｜domain｜>"},
    {"title", "<｜title｜>"},
    {"read_url", "<｜read_url｜>"},
}};

std::string_view task_token(const std::string& task) {
  for (const auto& [name, token] : kTaskTokens) {
    if (name == task) return token;
  }
  return {};
}

// A block of a user turn: text, or a tool result (its content already flattened to text).
struct Block {
  bool tool_result = false;
  std::string text;
  std::string tool_call_id;  // tool results only
};

struct ToolCallIn {
  std::string id;
  std::string name;
  ojson arguments;  // a JSON object
};

// One message as the renderer sees it.
struct Turn {
  std::string role;
  std::string content;
  std::vector<Block> blocks;                 // user turns
  ojson tools;                               // function objects (tools' "function"), or null
  ojson response_format;                     // or null
  std::vector<ToolCallIn> tool_calls;        // assistant turns
  std::optional<std::string> reasoning;      // assistant turns; dropped by drop_thinking
  std::optional<std::string> task;
  bool wo_eos = false;
};

// Python's truth value of a JSON value (the encoder tests `if tools:`, `if response_format:`).
bool truthy(const ojson& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  return !v.empty();
}

Status message_error(size_t index, const std::string& what) {
  return Status::Error("messages[" + std::to_string(index) + "]: " + what);
}

// content: string, null/absent, or a list of text parts.
Result<std::string> text_content(const ojson& msg, size_t index) {
  if (!msg.contains("content") || msg["content"].is_null()) return std::string();
  const ojson& c = msg["content"];
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) return message_error(index, "content must be a string or a list of content parts");
  std::string out;
  for (const ojson& part : c) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return message_error(index, "a content part must be an object with a \"type\"");
    }
    const std::string type = part["type"];
    if (type != "text") return message_error(index, "unsupported content part type '" + type + "'");
    if (!part.contains("text") || !part["text"].is_string()) {
      return message_error(index, "a text content part needs a string \"text\"");
    }
    out += part["text"].get<std::string>();
  }
  return out;
}

// A tool message's content: text, or parts joined by blank lines ("[Unsupported TYPE]" for
// parts that are not text), as DeepSeek's encoder renders tool results.
Result<std::string> tool_result_content(const ojson& msg, size_t index) {
  if (!msg.contains("content") || msg["content"].is_null()) return std::string();
  const ojson& c = msg["content"];
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) return message_error(index, "content must be a string or a list of content parts");
  std::string out;
  for (size_t i = 0; i < c.size(); ++i) {
    const ojson& part = c[i];
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
      return message_error(index, "a content part must be an object with a \"type\"");
    }
    if (i) out += "\n\n";
    const std::string type = part["type"];
    if (type == "text") {
      if (part.contains("text") && !part["text"].is_string()) return message_error(index, "\"text\" must be a string");
      out += part.value("text", "");
    } else {
      out += "[Unsupported " + type + "]";
    }
  }
  return out;
}

Result<std::optional<std::string>> optional_string(const ojson& msg, const char* key, size_t index) {
  if (!msg.contains(key) || msg[key].is_null()) return std::optional<std::string>();
  if (!msg[key].is_string()) return message_error(index, std::string(key) + " must be a string");
  return std::optional<std::string>(msg[key].get<std::string>());
}

Result<ToolCallIn> tool_call_in(const ojson& tc, size_t index, size_t call) {
  const std::string where = "tool_calls[" + std::to_string(call) + "]";
  if (!tc.is_object() || !tc.contains("function") || !tc["function"].is_object()) {
    return message_error(index, where + " must be an object with a \"function\"");
  }
  const ojson& fn = tc["function"];
  if (!fn.contains("name") || !fn["name"].is_string()) return message_error(index, where + ".function.name must be a string");
  ToolCallIn out;
  out.name = fn["name"];
  if (tc.contains("id") && tc["id"].is_string()) {
    out.id = tc["id"];
  } else if (fn.contains("id") && fn["id"].is_string()) {
    out.id = fn["id"];
  }
  const ojson args = fn.contains("arguments") ? fn["arguments"] : ojson();
  if (args.is_string()) {
    out.arguments = ojson::parse(args.get<std::string>(), nullptr, /*allow_exceptions=*/false);
    if (out.arguments.is_discarded()) return message_error(index, where + ".function.arguments is not valid JSON");
  } else {
    out.arguments = args;
  }
  if (!out.arguments.is_object()) return message_error(index, where + ".function.arguments must be a JSON object");
  return out;
}

// tools: OpenAI tool objects to their "function" objects.
Result<ojson> functions_of(const ojson& tools, size_t index) {
  if (tools.is_null()) return ojson();
  if (!tools.is_array()) return message_error(index, "tools must be a list");
  ojson out = ojson::array();
  for (const ojson& t : tools) {
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object()) {
      return message_error(index, "a tool must be an object with a \"function\"");
    }
    out.push_back(t["function"]);
  }
  return out;
}

// merge_tool_messages: converts messages[i] for i in [0, n) and folds tool messages (and user
// messages that follow them) into the user turn before, as content blocks.
Result<std::vector<Turn>> to_turns(const ojson& messages, size_t first_index) {
  if (!messages.is_array()) return Status::Error("messages must be a list");
  std::vector<Turn> turns;
  for (size_t k = 0; k < messages.size(); ++k) {
    const size_t index = first_index + k;
    const ojson& msg = messages[k];
    if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string()) {
      return message_error(index, "a message must be an object with a string \"role\"");
    }
    const std::string role = msg["role"];
    DI_ASSIGN_OR_RETURN(std::optional<std::string> task, optional_string(msg, "task", index));
    if (task && task_token(*task).empty()) return message_error(index, "unknown task '" + *task + "'");
    if (role == "tool") {
      Block block;
      block.tool_result = true;
      DI_ASSIGN_OR_RETURN(block.text, tool_result_content(msg, index));
      DI_ASSIGN_OR_RETURN(std::optional<std::string> id, optional_string(msg, "tool_call_id", index));
      block.tool_call_id = id.value_or("");
      if (!turns.empty() && turns.back().role == "user" && !turns.back().blocks.empty()) {
        turns.back().blocks.push_back(std::move(block));
      } else {
        Turn t;
        t.role = "user";
        t.blocks.push_back(std::move(block));
        turns.push_back(std::move(t));
      }
      continue;
    }
    Turn t;
    t.role = role;
    DI_ASSIGN_OR_RETURN(t.content, text_content(msg, index));
    t.task = task;
    if (role == "user") {
      Block block;
      block.text = t.content;
      if (!turns.empty() && turns.back().role == "user" && !turns.back().blocks.empty() && !turns.back().task) {
        turns.back().blocks.push_back(std::move(block));
      } else {
        t.blocks.push_back(std::move(block));
        turns.push_back(std::move(t));
      }
      continue;
    }
    if (role != "system" && role != "developer" && role != "assistant" && role != "latest_reminder") {
      return message_error(index, "unknown role '" + role + "'");
    }
    if (role == "developer" && t.content.empty()) return message_error(index, "a developer message needs content");
    if (msg.contains("tools")) {
      DI_ASSIGN_OR_RETURN(t.tools, functions_of(msg["tools"], index));
    }
    if (msg.contains("response_format")) t.response_format = msg["response_format"];
    if (role == "assistant") {
      DI_ASSIGN_OR_RETURN(t.reasoning, optional_string(msg, "reasoning_content", index));
      if (msg.contains("tool_calls") && !msg["tool_calls"].is_null()) {
        if (!msg["tool_calls"].is_array()) return message_error(index, "tool_calls must be a list");
        for (size_t c = 0; c < msg["tool_calls"].size(); ++c) {
          DI_ASSIGN_OR_RETURN(ToolCallIn call, tool_call_in(msg["tool_calls"][c], index, c));
          t.tool_calls.push_back(std::move(call));
        }
      }
      if (msg.contains("wo_eos") && !msg["wo_eos"].is_boolean()) return message_error(index, "wo_eos must be a boolean");
      t.wo_eos = msg.value("wo_eos", false);
    }
    turns.push_back(std::move(t));
  }
  return turns;
}

// sort_tool_results_by_call_order, and the check that each tool result answers a call: the tool
// results of a user turn follow the order of the last assistant turn with tool calls before it.
Status sort_tool_results(std::vector<Turn>& turns) {
  std::map<std::string, size_t> order;  // call id -> position, of the last turn with calls
  bool saw_calls = false;
  for (Turn& t : turns) {
    if (t.role == "assistant" && !t.tool_calls.empty()) {
      saw_calls = true;
      order.clear();
      for (size_t i = 0; i < t.tool_calls.size(); ++i) {
        if (!t.tool_calls[i].id.empty()) order.emplace(t.tool_calls[i].id, i);
      }
      continue;
    }
    if (t.role != "user") continue;
    std::vector<Block*> results;
    for (Block& b : t.blocks) {
      if (!b.tool_result) continue;
      if (!saw_calls) return Status::Error("a tool message answers no tool call: no assistant tool_calls before it");
      if (!b.tool_call_id.empty() && !order.contains(b.tool_call_id)) {
        return Status::Error("tool_call_id '" + b.tool_call_id + "' matches no tool call of the assistant turn before it");
      }
      results.push_back(&b);
    }
    if (results.size() < 2 || order.empty()) continue;
    std::vector<Block> sorted;
    for (Block* b : results) sorted.push_back(std::move(*b));
    std::stable_sort(sorted.begin(), sorted.end(), [&](const Block& a, const Block& b) {
      const auto ia = order.find(a.tool_call_id), ib = order.find(b.tool_call_id);
      return (ia == order.end() ? 0 : ia->second) < (ib == order.end() ? 0 : ib->second);
    });
    for (size_t i = 0; i < results.size(); ++i) *results[i] = std::move(sorted[i]);
  }
  return Status::Ok();
}

int last_user_index(const std::vector<Turn>& turns) {
  for (int i = static_cast<int>(turns.size()) - 1; i >= 0; --i) {
    if (turns[i].role == "user" || turns[i].role == "developer") return i;
  }
  return -1;
}

// _drop_thinking_messages: before the last user turn, assistant turns lose their reasoning and
// developer turns are dropped.
std::vector<Turn> drop_thinking(const std::vector<Turn>& turns) {
  const int last_user = last_user_index(turns);
  std::vector<Turn> out;
  for (int i = 0; i < static_cast<int>(turns.size()); ++i) {
    const Turn& t = turns[i];
    if (t.role == "user" || t.role == "system" || t.role == "latest_reminder" || i >= last_user) {
      out.push_back(t);
    } else if (t.role == "assistant") {
      out.push_back(t);
      out.back().reasoning.reset();
    }
  }
  return out;
}

std::string render_tools(const ojson& functions) {
  std::string schemas;
  for (size_t i = 0; i < functions.size(); ++i) {
    if (i) schemas += '\n';
    schemas += python_json_dumps(functions[i]);
  }
  return std::string(
             "## Tools\n\n"
             "You have access to a set of tools to help answer the user's question. You can invoke tools by writing "
             "a \"<｜DSML｜tool_calls>\" block like the following:\n\n"
             "<｜DSML｜tool_calls>\n"
             "<｜DSML｜invoke name=\"$TOOL_NAME\">\n"
             "<｜DSML｜parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</｜DSML｜parameter>\n"
             "...\n"
             "</｜DSML｜invoke>\n"
             "<｜DSML｜invoke name=\"$TOOL_NAME2\">\n"
             "...\n"
             "</｜DSML｜invoke>\n"
             "</｜DSML｜tool_calls>\n\n"
             "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, "
             "booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
             "If thinking_mode is enabled (triggered by <think>), you MUST output your complete reasoning inside "
             "<think>...</think> BEFORE any tool calls or final response.\n\n"
             "Otherwise, output directly after </think> with tool calls or final response.\n\n"
             "### Available Tool Schemas\n\n") +
         schemas + "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";
}

// The tools and response format sections of a system or developer turn.
std::string render_instructions(const Turn& t) {
  std::string out;
  if (truthy(t.tools)) out += "\n\n" + render_tools(t.tools);
  if (truthy(t.response_format)) {
    out += "\n\n## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";
    out += python_json_dumps(t.response_format);
  }
  return out;
}

std::string render_tool_calls(const std::vector<ToolCallIn>& calls) {
  std::string out = "\n\n<｜DSML｜tool_calls>\n";
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i) out += '\n';
    out += "<｜DSML｜invoke name=\"" + calls[i].name + "\">\n";
    bool first = true;
    for (const auto& [key, value] : calls[i].arguments.items()) {
      if (!first) out += '\n';
      first = false;
      const bool is_string = value.is_string();
      out += "<｜DSML｜parameter name=\"" + key + "\" string=\"" + (is_string ? "true" : "false") + "\">";
      out += is_string ? value.get<std::string>() : python_json_dumps(value);
      out += "</｜DSML｜parameter>";
    }
    out += "\n</｜DSML｜invoke>";
  }
  return out + "\n</｜DSML｜tool_calls>";
}

// render_message: turn `index` of `turns`, and what opens the next turn.
std::string render_turn(size_t index, const std::vector<Turn>& turns, const DeepseekV4Options& options,
                        bool drop) {
  const bool thinking = options.thinking_mode == ThinkingMode::kThinking;
  const int last_user = last_user_index(turns);
  const Turn& t = turns[index];
  std::string out;
  if (index == 0 && thinking && options.reasoning_effort == "max") out += kReasoningEffortMax;

  if (t.role == "system") {
    out += t.content + render_instructions(t);
  } else if (t.role == "developer") {
    out += std::string(dsv4::kUser) + t.content + render_instructions(t);
  } else if (t.role == "user") {
    out += dsv4::kUser;
    for (size_t i = 0; i < t.blocks.size(); ++i) {
      if (i) out += "\n\n";
      const Block& b = t.blocks[i];
      out += b.tool_result ? "<tool_result>" + b.text + "</tool_result>" : b.text;
    }
  } else if (t.role == "latest_reminder") {
    out += std::string(dsv4::kLatestReminder) + t.content;
  } else {  // assistant
    const bool after_task = index > 0 && turns[index - 1].task.has_value();
    if (thinking && !after_task && (!drop || static_cast<int>(index) > last_user)) {
      out += t.reasoning.value_or("") + std::string(dsv4::kThinkEnd);
    }
    out += t.content;
    if (!t.tool_calls.empty()) out += render_tool_calls(t.tool_calls);
    if (!t.wo_eos) out += dsv4::kEos;
  }

  if (index + 1 < turns.size() && turns[index + 1].role != "assistant" && turns[index + 1].role != "latest_reminder") {
    return out;
  }
  if (t.task) {
    if (*t.task != "action") {
      out += task_token(*t.task);
    } else {
      out += std::string(dsv4::kAssistant) + std::string(thinking ? dsv4::kThinkStart : dsv4::kThinkEnd);
      out += task_token(*t.task);
    }
  } else if (t.role == "user" || t.role == "developer") {
    out += dsv4::kAssistant;
    const bool open_thinking = thinking && (!drop || static_cast<int>(index) >= last_user);
    out += open_thinking ? dsv4::kThinkStart : dsv4::kThinkEnd;
  }
  return out;
}

bool has_tools(const std::vector<Turn>& turns) {
  return std::any_of(turns.begin(), turns.end(), [](const Turn& t) { return truthy(t.tools); });
}

}  // namespace

Result<DeepseekV4Options> DeepseekV4Options::FromJson(const std::string& thinking_mode, const ojson& options) {
  DeepseekV4Options out;
  if (thinking_mode == "chat") {
    out.thinking_mode = ThinkingMode::kChat;
  } else if (thinking_mode == "thinking") {
    out.thinking_mode = ThinkingMode::kThinking;
  } else {
    return Status::Error("thinking_mode must be \"chat\" or \"thinking\", not '" + thinking_mode + "'");
  }
  if (options.is_null()) return out;
  if (!options.is_object()) return Status::Error("options must be an object");
  for (const auto& [key, value] : options.items()) {
    if (key == "drop_thinking" || key == "add_default_bos_token") {
      if (!value.is_boolean()) return Status::Error("options." + key + " must be a boolean");
      (key == "drop_thinking" ? out.drop_thinking : out.add_default_bos_token) = value.get<bool>();
    } else if (key == "reasoning_effort") {
      if (!value.is_null() && !value.is_string()) return Status::Error("options.reasoning_effort must be a string");
      out.reasoning_effort = value.is_null() ? "" : value.get<std::string>();
    } else if (key == "context") {
      if (!value.is_null() && !value.is_array()) return Status::Error("options.context must be a list of messages");
      out.context = value.is_null() ? ojson::array() : value;
    } else {
      return Status::Error("unknown option '" + key + "'");
    }
  }
  return out;
}

Result<std::string> encode_deepseek_v4(const ojson& messages, const ojson& tools, const DeepseekV4Options& options) {
  if (!options.reasoning_effort.empty() && options.reasoning_effort != "high" && options.reasoning_effort != "max") {
    return Status::Error("reasoning_effort must be \"high\" or \"max\", not '" + options.reasoning_effort + "'");
  }
  if (!messages.is_array()) return Status::Error("messages must be a list");
  ojson with_tools = messages;
  if (truthy(tools)) {
    const bool system_first = !with_tools.empty() && with_tools[0].is_object() && with_tools[0].contains("role") &&
                              with_tools[0]["role"] == "system";
    if (system_first) {
      with_tools[0]["tools"] = tools;
    } else {
      with_tools.insert(with_tools.begin(), ojson{{"role", "system"}, {"content", ""}, {"tools", tools}});
    }
  }
  const size_t n_context_messages = options.context.size();
  DI_ASSIGN_OR_RETURN(std::vector<Turn> context, to_turns(options.context, 0));
  DI_ASSIGN_OR_RETURN(std::vector<Turn> turns, to_turns(with_tools, n_context_messages));
  std::vector<Turn> all = context;
  all.insert(all.end(), turns.begin(), turns.end());
  DI_RETURN_IF_ERROR(sort_tool_results(all));

  std::string prompt = options.add_default_bos_token && context.empty() ? std::string(dsv4::kBos) : std::string();
  const bool drop = options.drop_thinking && !has_tools(all);
  size_t n_render = turns.size();
  if (options.thinking_mode == ThinkingMode::kThinking && drop) {
    std::vector<Turn> sorted_context(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(context.size()));
    all = drop_thinking(all);
    n_render = all.size() - drop_thinking(sorted_context).size();
  }
  for (size_t i = all.size() - n_render; i < all.size(); ++i) prompt += render_turn(i, all, options, drop);
  return prompt;
}

}  // namespace deepinfer::chat
