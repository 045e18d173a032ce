// Frame warm-up: the frames every JSON grammar meets (the inside of a plain string with its
// escapes, numbers and integers, true/false/null, the separators and brackets of any value),
// computed into a vocabulary's FrameMaskStore ahead of the requests that would otherwise pay
// each frame's first visit (a walk of the whole token trie, milliseconds at a 129K vocabulary)
// on the engine thread.
//
// warm_json_frames compiles one schema holding each of those parts under `options` (frames
// depend on the options: separators, escaped characters, digit bounds) and fills the mask of
// every state met byte by byte along sample texts of it. Frames are keyed by grammar structure,
// so every schema compiled with the same options then finds them. Stops early when `cancel` is
// set. Thread-safe (the store is); meant for a background thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "grammar/json_schema_options.h"
#include "grammar/token_vocabulary.h"

namespace deepinfer::grammar {

// The number of states whose masks were filled.
size_t warm_json_frames(const std::shared_ptr<const TokenVocabulary>& vocabulary, const JsonSchemaOptions& options,
                        const std::atomic<bool>& cancel);

}  // namespace deepinfer::grammar
