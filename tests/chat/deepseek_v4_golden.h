// Reading tests/data/chat/deepseek-v4/golden.jsonl, copied from the team fixtures
// (shared/fixtures/chat/deepseek-v4): conversations rendered by DeepSeek's own encoder
// (encoding_dsv4.py encode_messages; kind "encode") and completions parsed by its
// parse_message_from_completion_text (kind "parse"), each with the ids of the real V4 tokenizer.
#pragma once

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace deepinfer::chat::testing {

inline constexpr const char* kV4GoldenPath = "tests/data/chat/deepseek-v4/golden.jsonl";
inline constexpr const char* kV4TokenizerDir = "tests/data/tokenizers/deepseek-v4";

inline std::vector<nlohmann::ordered_json> v4_golden(const std::string& kind) {
  std::vector<nlohmann::ordered_json> rows;
  std::ifstream in(kV4GoldenPath);
  std::string line;
  while (std::getline(in, line)) {
    auto row = nlohmann::ordered_json::parse(line);
    if (row["kind"] == kind) rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace deepinfer::chat::testing
