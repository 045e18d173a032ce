// The pages of a weight as stored in the checkpoint's file mapping (weight_data_bytes from
// w.data), brought in or dropped: expert parallelism binds and releases experts while serving,
// and a weight relaid into another layout (Backend::relay_weight, relay_into) no longer reads its
// stored bytes.
#pragma once

#include <cstdint>
#include <deque>

#include "core/aligned_vector.h"
#include "kernels/ops.h"

namespace deepinfer {

// Maps every page of the weight into the page tables now (reading it from the file if needed), so
// decode steps do not take page faults the first time a token routes to an expert.
void prefault_pages(const LinearWeight& w);

// Drops the weight's pages from this process, its data's and its scales' (the whole pages inside
// them; neighbours keep theirs), so that it stops counting in the resident memory. Reads would
// fault the pages in again from the file (or, for a copy in process memory, read zeros).
void release_pages(const LinearWeight& w);

// Where the backend reads w faster in another layout (Backend::relay_weight), copies it into new
// storage at the end of `store` (unzeroed: the relay writes every byte, its threads touching the
// pages first), points w at it and releases the stored bytes' pages (unless
// keep_pages: another weight still reads them, as a tied lm_head the embedding's). Else leaves w.
// Returns the bytes copied (0: left as stored).
size_t relay_into(Backend& backend, LinearWeight& w, std::deque<UninitBytes>& store, bool keep_pages = false);

}  // namespace deepinfer
