// ChatTemplate against renderings by Hugging Face transformers' apply_chat_template.
// - deepseek_v3_chat_golden.jsonl: the shared fixture (tokenizers/deepseek-v3/chat_golden.jsonl),
//   conversations rendered by transformers with the real DeepSeek-V3 tokenizer_config.json.
// - reference/*.jsonl: written by tests/chat/make_reference.py with transformers 4.57.1 from the
//   templates in tests/data/chat/templates/ (see the README there for where each comes from).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
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

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Every template under tests/data/chat/templates against transformers' renderings of it; where
// transformers raises (roles that do not alternate, a dict added to a str...), so must we.
TEST(ChatTemplate, MatchesTransformersOnCollectedTemplates) {
  int rendered_rows = 0, error_rows = 0;
  for (const auto& entry : std::filesystem::directory_iterator("tests/data/chat/reference")) {
    const std::string file = entry.path().filename().string();
    if (file == "deepseek-v3-tokenized.jsonl" || file == "jinja_snippets.jsonl") continue;
    std::map<std::string, Result<ChatTemplate>> loaded;
    for (const ojson& row : read_jsonl(entry.path().string())) {
      const std::string name = row["template"].get<std::string>();
      auto it = loaded.find(name);
      if (it == loaded.end()) {
        ojson config = row["special_tokens"];
        config["chat_template"] = read_file("tests/data/chat/templates/" + name);
        it = loaded.emplace(name, ChatTemplate::FromConfig(config)).first;
      }
      ASSERT_TRUE(it->second.ok()) << name << ": " << it->second.status().message();
      const std::string where = name + " / " + row["case"].get<std::string>() +
                                (row["add_generation_prompt"].get<bool>() ? " / generation prompt" : "");
      auto out = it->second->render(row["messages"], row["tools"], row["add_generation_prompt"].get<bool>(),
                                    row["kwargs"]);
      if (row.contains("error")) {
        EXPECT_FALSE(out.ok()) << where << ": transformers raised " << row["error"].get<std::string>()
                               << " but we rendered:\n" << *out;
        ++error_rows;
      } else {
        ASSERT_TRUE(out.ok()) << where << ": " << out.status().message();
        EXPECT_EQ(*out, row["rendered"].get<std::string>()) << where;
        ++rendered_rows;
      }
    }
  }
  EXPECT_GT(rendered_rows, 300);
  EXPECT_GT(error_rows, 50);
}

}  // namespace
}  // namespace deepinfer::chat
