#include "engine/output_stream.h"

#include "core/check.h"

namespace deepinfer {

void OutputStream::push(RequestOutput update) {
  {
    std::lock_guard lock(mu_);
    DI_CHECK(n_finished_ < n_samples_);
    if (update.finished()) ++n_finished_;
    RequestOutput* merged = nullptr;
    for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
      if (it->sample_index == update.sample_index) {
        merged = &*it;
        break;
      }
    }
    if (merged == nullptr) {
      pending_.push_back(std::move(update));
    } else {
      merged->token_ids.insert(merged->token_ids.end(), update.token_ids.begin(), update.token_ids.end());
      merged->logprobs.insert(merged->logprobs.end(), std::make_move_iterator(update.logprobs.begin()),
                              std::make_move_iterator(update.logprobs.end()));
      merged->finish_reason = update.finish_reason;
      merged->n_cached_tokens = update.n_cached_tokens;
      merged->timing = update.timing;
    }
  }
  cv_.notify_all();
  if (notify_) notify_();
}

std::optional<RequestOutput> OutputStream::pop_locked() {
  if (pending_.empty()) return std::nullopt;
  RequestOutput out = std::move(pending_.front());
  pending_.pop_front();
  return out;
}

std::optional<RequestOutput> OutputStream::next() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !pending_.empty() || n_finished_ == n_samples_; });
  return pop_locked();
}

std::optional<RequestOutput> OutputStream::try_next() {
  std::lock_guard lock(mu_);
  return pop_locked();
}

bool OutputStream::done() const {
  std::lock_guard lock(mu_);
  return pending_.empty() && n_finished_ == n_samples_;
}

}  // namespace deepinfer
