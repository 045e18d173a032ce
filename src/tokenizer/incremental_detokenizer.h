// IncrementalDetokenizer: streaming decode of one sequence. push(id) returns the text that is
// safe to show now; finish() returns what is still held. The concatenation of everything
// returned equals Tokenizer::decode of all pushed ids (with the same skip_special_tokens), and
// no returned piece ends inside a UTF-8 character.
//
// Text is held while the pending tokens decode to something ending in U+FFFD (an incomplete
// character, which later bytes may complete) and after a byte-fallback token <0xXX> (the next
// byte tokens may complete its character). Each push decodes only the pending tokens. A decoder
// whose rules reach across tokens (Decoder::stream_local() false: BPEDecoder, Strip at the end of
// fused text, multi-character Replace after Fuse; none of the LLM tokenizers tested uses one) holds
// all text until finish(), which keeps the result exact.
//
// One object per sequence, used from one thread at a time; it shares the Tokenizer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(Tokenizer tokenizer, bool skip_special_tokens);

  // Adds one token; returns the newly safe text (often empty). An id with no token is an error
  // and leaves the state unchanged.
  Result<std::string> push(int32_t id);
  // Returns the held text and starts a new sequence.
  Result<std::string> finish();

 private:
  Tokenizer tokenizer_;
  bool skip_special_tokens_;
  bool stream_local_;
  bool byte_fallback_;
  std::vector<int32_t> pending_;  // tokens whose text has not been returned yet
  bool continuation_ = false;     // tokens were returned before pending_
};

}  // namespace deepinfer
