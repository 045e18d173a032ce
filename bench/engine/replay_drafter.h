// ReplayDrafter: a benchmark-only drafter that knows the future. It is given, per request id,
// the tokens greedy plain decoding produces (prompt and output, from an earlier plain run), and
// proposes the next ones: every draft is accepted, which measures the ceiling of speculative
// decoding (what verifying k drafts costs against one token). With `wrong`, each draft is the
// next id after the right one instead: never accepted, which measures the cost of verification
// that never pays. Only the benchmarks link it; the server cannot reach it.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "engine/drafter.h"

namespace deepinfer::bench {

class ReplayDrafter final : public Drafter {
 public:
  ReplayDrafter(std::map<uint64_t, std::vector<int32_t>> tokens, int vocab_size, bool wrong)
      : tokens_(std::move(tokens)), vocab_size_(vocab_size), wrong_(wrong) {}

  std::vector<std::vector<int32_t>> propose(std::span<const DraftTarget> targets) override {
    std::vector<std::vector<int32_t>> drafts;
    for (const DraftTarget& t : targets) {
      const std::vector<int32_t>& known = tokens_.at(t.seq->request_id());
      std::vector<int32_t>& d = drafts.emplace_back();
      for (size_t i = size_t(t.seq->n_tokens()); i < known.size() && int(d.size()) < t.n_drafts; ++i)
        d.push_back(wrong_ ? (known[i] + 1) % vocab_size_ : known[i]);
    }
    return drafts;
  }

 private:
  std::map<uint64_t, std::vector<int32_t>> tokens_;
  int vocab_size_;
  bool wrong_;
};

}  // namespace deepinfer::bench
