#include "server/deepseek_v4_chat.h"

#include "chat/deepseek_v4_encoder.h"
#include "chat/deepseek_v4_request.h"

namespace deepinfer {

namespace {

ApiError bad_request(const Status& s, const std::string& param) {
  ApiError e;
  e.message = s.message();
  e.param = s.field().empty() ? param : s.field();
  return e;
}

}  // namespace

ApiResult<DeepseekV4Chat> render_deepseek_v4_chat(const ChatRequest& r) {
  auto options = chat::deepseek_v4_request_options(r.reasoning_effort, r.chat_template_kwargs);
  if (!options.ok()) return bad_request(options.status(), "chat_template_kwargs");
  const bool use_tools = !r.tools.is_null() && r.tool_choice != "none";
  auto prompt = chat::encode_deepseek_v4(r.messages, use_tools ? r.tools : nlohmann::ordered_json(), *options);
  if (!prompt.ok()) return bad_request(prompt.status(), "messages");
  DeepseekV4Chat out;
  out.prompt = std::move(prompt).value();
  out.thinking = options->thinking_mode == chat::ThinkingMode::kThinking;
  if (use_tools) {
    out.forced_prefix = chat::deepseek_v4_forced_tool_call_prefix(options->thinking_mode, r.tool_choice, r.tool_choice_function);
  }
  return out;
}

}  // namespace deepinfer
