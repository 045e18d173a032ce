// The prefix-affinity key: the same leading bytes give the same key, whatever follows them.
#include "dist/router/affinity_key.h"

#include <gtest/gtest.h>

namespace deepinfer::router {
namespace {

using ojson = nlohmann::ordered_json;

TEST(AffinityKey, CompletionsPromptsSharingTheLeadingBytes) {
  const std::string shared(600, 'x');
  const auto a = affinity_key(ojson{{"prompt", shared + " first question"}, {"max_tokens", 3}}, 512);
  const auto b = affinity_key(ojson{{"prompt", shared + " second"}, {"temperature", 0}}, 512);
  const auto c = affinity_key(ojson{{"prompt", "another " + shared}}, 512);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(affinity_key(ojson{{"prompt", "ab"}}, 512), affinity_key(ojson{{"prompt", "ac"}}, 512));
  // A list of prompts: its first; token ids: their text.
  EXPECT_EQ(affinity_key(ojson{{"prompt", ojson::array({"p", "q"})}}), affinity_key(ojson{{"prompt", "p"}}));
  EXPECT_EQ(affinity_key(ojson{{"prompt", ojson::array({1, 2, 3})}}), affinity_key(ojson{{"prompt", "[1,2,3]"}}));
}

TEST(AffinityKey, ChatMessagesSharingASystemPrompt) {
  const ojson system = {{"role", "system"}, {"content", std::string(1000, 's')}};
  const ojson a = {{"messages", ojson::array({system, {{"role", "user"}, {"content", "hi"}}})}};
  const ojson b = {{"messages", ojson::array({system, {{"role", "user"}, {"content", "bye"}}})}, {"stream", true}};
  EXPECT_EQ(affinity_key(a), affinity_key(b));
  const ojson c = {{"messages", ojson::array({{{"role", "user"}, {"content", "hi"}}})}};
  EXPECT_NE(affinity_key(a), affinity_key(c));
  // Short conversations differ as soon as their text does.
  const ojson d = {{"messages", ojson::array({{{"role", "user"}, {"content", "bye"}}})}};
  EXPECT_NE(affinity_key(c), affinity_key(d));
}

TEST(AffinityKey, BodiesWithoutAPromptStillHaveAKey) {
  EXPECT_EQ(affinity_key(ojson::object()), affinity_key(ojson{{"max_tokens", 1}}));
  EXPECT_EQ(affinity_key(ojson::array()), affinity_key(ojson::object()));
}

}  // namespace
}  // namespace deepinfer::router
