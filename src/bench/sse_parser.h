// SseParser: splits a server-sent-events byte stream (text/event-stream) into events.
// Bytes arrive in arbitrary pieces; an event is complete at its blank line. Only `data:` fields
// matter for OpenAI-style streams: the data lines of one event are joined with "\n"; comments
// (":...") and other fields are skipped. Lines end in "\n", "\r\n" or "\r".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace deepinfer::bench {

class SseParser {
 public:
  // Feeds the next bytes; appends the data of each event completed by them to `events`.
  void feed(std::string_view bytes, std::vector<std::string>& events);
  // Bytes held for an incomplete line or event.
  bool pending() const { return !line_.empty() || has_data_; }

 private:
  void end_line(std::vector<std::string>& events);

  std::string line_;     // the current line, without its terminator
  std::string data_;     // data of the current event so far
  bool has_data_ = false;
  bool after_cr_ = false;  // the previous byte was '\r': a following '\n' belongs to it
};

}  // namespace deepinfer::bench
