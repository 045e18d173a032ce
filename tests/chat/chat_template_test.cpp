// ChatTemplate against renderings by Hugging Face transformers' apply_chat_template.
// - deepseek_v3_chat_golden.jsonl: the shared fixture (tokenizers/deepseek-v3/chat_golden.jsonl),
//   conversations rendered by transformers with the real DeepSeek-V3 tokenizer_config.json.
// - reference/**.jsonl: written by tests/chat/make_reference.py with transformers 4.57.1 from the
//   templates in tests/data/chat/templates/ (see the README there for where each comes from) and
//   the conversations in reference/cases.json.
#include <gtest/gtest.h>

#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <optional>
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

// strftime_now() rendered 1999-12-31 in the reference (make_reference.py pins the clock); we render
// today. Swaps the pinned date, in each format the templates use, for today's.
std::string with_todays_date(std::string text) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  const std::pair<const char*, const char*> formats[] = {
      {"1999-12-31", "%Y-%m-%d"}, {"31 Dec 1999", "%d %b %Y"}, {"December 31, 1999", "%B %d, %Y"}};
  for (const auto& [pinned, format] : formats) {
    char today[64];
    std::strftime(today, sizeof(today), format, &local);
    for (size_t at = text.find(pinned); at != std::string::npos; at = text.find(pinned, at + 1)) {
      text.replace(at, std::strlen(pinned), today);
    }
  }
  return text;
}

// Every template under tests/data/chat/templates (including llama.cpp/, the other checkpoints'
// templates collected there) against transformers' renderings of every conversation in
// reference/cases.json; where transformers raises (roles that do not alternate, a dict added to a
// str...), so must we.
TEST(ChatTemplate, MatchesTransformersOnCollectedTemplates) {
  const ojson cases = ojson::parse(read_file("tests/data/chat/reference/cases.json"));
  int rendered_rows = 0, error_rows = 0, templates = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator("tests/data/chat/reference")) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() != ".jsonl" || file == "deepseek-v3-tokenized.jsonl" ||
        file == "jinja_snippets.jsonl") {
      continue;
    }
    ++templates;
    std::optional<Result<ChatTemplate>> loaded;
    for (const ojson& row : read_jsonl(entry.path().string())) {
      const std::string name = row["template"].get<std::string>();
      if (!loaded) {
        ojson config = row["special_tokens"];
        config["chat_template"] = read_file("tests/data/chat/templates/" + name);
        loaded = ChatTemplate::FromConfig(config);
      }
      ASSERT_TRUE(loaded->ok()) << name << ": " << loaded->status().message();
      const std::string case_name = row["case"].get<std::string>();
      const ojson& c = cases[case_name];
      const std::string where = name + " / " + case_name +
                                (row["add_generation_prompt"].get<bool>() ? " / generation prompt" : "");
      auto out = (*loaded)->render(c["messages"], c["tools"], row["add_generation_prompt"].get<bool>(), c["kwargs"]);
      if (row.contains("error")) {
        EXPECT_FALSE(out.ok()) << where << ": transformers raised " << row["error"].get<std::string>()
                               << " but we rendered:\n" << *out;
        ++error_rows;
      } else {
        ASSERT_TRUE(out.ok()) << where << ": " << out.status().message();
        EXPECT_EQ(*out, with_todays_date(row["rendered"].get<std::string>())) << where;
        ++rendered_rows;
      }
    }
  }
  EXPECT_EQ(templates, 13 + 57);
  EXPECT_GT(rendered_rows, 2000);
  EXPECT_GT(error_rows, 200);
}

}  // namespace
}  // namespace deepinfer::chat
