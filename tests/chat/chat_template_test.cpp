// ChatTemplate against renderings by Hugging Face transformers' apply_chat_template.
// - deepseek_v3_chat_golden.jsonl: the shared fixture (tokenizers/deepseek-v3/chat_golden.jsonl),
//   conversations rendered by transformers with the real DeepSeek-V3 tokenizer_config.json.
// - reference/*.jsonl: written by tests/chat/make_reference.py with transformers 4.57.1 from the
//   templates in tests/data/chat/templates/ (see the README there for where each comes from).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "chat/chat_template.h"

namespace deepinfer::chat {
namespace {

using ojson = nlohmann::ordered_json;

std::vector<ojson> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<ojson> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) rows.push_back(ojson::parse(line));
  }
  return rows;
}

TEST(ChatTemplate, DeepSeekV3GoldenFromTransformers) {
  auto tmpl = ChatTemplate::Load("tests/data/chat/models/deepseek-v3");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().message();
  const auto rows = read_jsonl("tests/data/chat/deepseek_v3_chat_golden.jsonl");
  ASSERT_EQ(rows.size(), 14u);
  for (const ojson& row : rows) {
    auto rendered = tmpl->render(row["messages"], nullptr, row["add_generation_prompt"].get<bool>(), ojson::object());
    ASSERT_TRUE(rendered.ok()) << rendered.status().message();
    EXPECT_EQ(*rendered, row["rendered"].get<std::string>()) << row["messages"].dump();
  }
}

}  // namespace
}  // namespace deepinfer::chat
