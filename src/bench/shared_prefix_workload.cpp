// shared-prefix: single-turn requests in n_prefix_groups groups; every request of a group starts
// with the group's prefix_len-token prefix, followed by its own suffix (input_len). Request i is
// in group i % n_prefix_groups, so groups interleave and each prefix is reused while hot.
#include "bench/word_text.h"
#include "bench/workload.h"

namespace deepinfer::bench {
namespace {

class SharedPrefixWorkload : public Workload {
 public:
  explicit SharedPrefixWorkload(const WorkloadOptions& options) : options_(options) {
    for (int64_t g = 0; g < options.n_prefix_groups; ++g) {
      Rng rng = Rng::Derive(options.seed, static_cast<uint64_t>(Stream::kPrefix), static_cast<uint64_t>(g));
      prefixes_.push_back(WordText::make(options.prefix_len, rng));
    }
  }
  int64_t n_conversations() const override { return options_.n_conversations; }
  std::unique_ptr<Conversation> conversation(int64_t index) const override {
    Rng rng = Rng::Derive(options_.seed, static_cast<uint64_t>(Stream::kSuffix), static_cast<uint64_t>(index));
    TurnRequest r;
    const int64_t n_suffix = options_.input_len.sample_count(rng);
    r.n_tokens_in = options_.prefix_len + n_suffix;
    r.n_tokens_out = options_.output_len.sample_count(rng);
    std::string prompt = prefixes_[static_cast<size_t>(index % options_.n_prefix_groups)];
    WordText::append(prompt, n_suffix, rng);
    r.messages.push_back({"user", std::move(prompt)});
    return std::make_unique<SingleTurn>(std::move(r));
  }

 private:
  WorkloadOptions options_;
  std::vector<std::string> prefixes_;
};

}  // namespace

Result<std::unique_ptr<Workload>> make_shared_prefix_workload(const WorkloadOptions& options) {
  if (options.n_prefix_groups < 1) return Status::Error("shared-prefix: --prefix-groups must be >= 1");
  if (options.prefix_len < 1) return Status::Error("shared-prefix: --prefix-len must be >= 1");
  return std::unique_ptr<Workload>(std::make_unique<SharedPrefixWorkload>(options));
}

}  // namespace deepinfer::bench
