// random: independent single-turn requests with input and output lengths drawn per request.
// Prompts share no prefix (beyond chance agreement of the first word).
#include "bench/word_text.h"
#include "bench/workload.h"

namespace deepinfer::bench {
namespace {

class RandomWorkload : public Workload {
 public:
  explicit RandomWorkload(const WorkloadOptions& options) : options_(options) {}
  int64_t n_conversations() const override { return options_.n_conversations; }
  std::unique_ptr<Conversation> conversation(int64_t index) const override {
    Rng rng = Rng::Derive(options_.seed, static_cast<uint64_t>(Stream::kRandom), static_cast<uint64_t>(index));
    TurnRequest r;
    r.n_tokens_in = options_.input_len.sample_count(rng);
    r.n_tokens_out = options_.output_len.sample_count(rng);
    r.messages.push_back({"user", WordText::make(r.n_tokens_in, rng)});
    return std::make_unique<SingleTurn>(std::move(r));
  }

 private:
  WorkloadOptions options_;
};

}  // namespace

std::unique_ptr<Workload> make_random_workload(const WorkloadOptions& options) {
  return std::make_unique<RandomWorkload>(options);
}

}  // namespace deepinfer::bench
