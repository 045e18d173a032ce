// StopMatcher: finds OpenAI `stop` strings in streamed text. Text that could still become the
// start of a stop string is held back until it is decided, so nothing is streamed and then
// retracted; the stop string itself and anything after it are never emitted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace deepinfer {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  struct Output {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string matched; `text` ends right before it
  };
  // Feeds the next delta of decoded text (whole UTF-8 characters). After a stop, returns nothing.
  Output push(std::string_view delta);
  // At the end of generation: the held-back text, which no stop string completed.
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace deepinfer
