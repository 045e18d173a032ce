#include "engine/engine_core.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "engine/mtp_drafter.h"
#include "engine/ngram_drafter.h"

namespace deepinfer {

namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

bool contains(const std::vector<int32_t>& ids, int32_t id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

std::vector<KvKindBlocks> kind_blocks(const KvCacheInfo& info) {
  std::vector<KvKindBlocks> kinds;
  for (const KvKindInfo& k : info.kinds) kinds.push_back({k.spec.lookback, k.n_blocks});
  return kinds;
}

}  // namespace

Result<std::unique_ptr<EngineCore>> EngineCore::create(CausalLM& model, const EngineOptions& options) {
  DI_RETURN_IF_ERROR(options.validate());
  if (options.speculative == SpeculativeMethod::kMtp && !model.can_draft())
    return Status::Error("--speculative mtp: " + model.info().architecture +
                         " has no MTP drafter here (DeepSeek-V2/V3 checkpoints with an MTP layer and DeepSeek-V4 ones "
                         "with an MTP block, loaded for drafting)");
  DI_ASSIGN_OR_RETURN(const size_t budget, options.kv_cache_budget());
  DI_ASSIGN_OR_RETURN(const std::vector<KvKindSpec> kinds, model.kv_kinds(options.kv_cache_dtype, options.block_size));
  DI_ASSIGN_OR_RETURN(const std::vector<int> n_blocks,
                      kv_blocks_for_budget(kinds, options.block_size, budget, options.max_num_seqs,
                                           options.max_num_batched_tokens));
  DI_ASSIGN_OR_RETURN(auto cache, KvCache::create(kinds, n_blocks, options.kv_cache_dtype, options.block_size));
  return std::unique_ptr<EngineCore>(new EngineCore(model, options, std::move(cache)));
}

EngineCore::EngineCore(CausalLM& model, const EngineOptions& options, std::unique_ptr<KvCache> cache)
    : model_(model),
      options_(options),
      cache_(std::move(cache)),
      kv_(options.block_size, kind_blocks(cache_->info()), options.enable_prefix_caching,
          model.kv_depends_on_provenance()),
      scheduler_({options.max_num_batched_tokens, options.max_num_seqs}, kv_),
      runner_(model, *cache_),
      sampler_(model.info().vocab_size),
      draft_gate_(options.speculative_gate),
      max_model_len_(kv_.max_tokens_per_sequence()) {
  if (model.info().max_position_embeddings > 0) max_model_len_ = std::min(max_model_len_, model.info().max_position_embeddings);
  if (options.max_model_len > 0) max_model_len_ = std::min(max_model_len_, options.max_model_len);
  if (options.speculative == SpeculativeMethod::kNgram) drafter_ = std::make_unique<NgramDrafter>();
  if (options.speculative == SpeculativeMethod::kMtp) drafter_ = std::make_unique<MtpDrafter>(model, *cache_);
}

Status EngineCore::validate(const Request& request) const {
  const int vocab = model_.info().vocab_size;
  const int n_prompt = int(request.prompt_token_ids.size());
  if (n_prompt == 0) return Status::Error("the prompt is empty").with_field("prompt");
  for (int i = 0; i < n_prompt; ++i) {
    const int32_t id = request.prompt_token_ids[size_t(i)];
    if (id < 0 || id >= vocab) {
      return Status::Error("prompt token " + std::to_string(i) + " (id " + std::to_string(id) +
                           ") is outside the vocabulary [0, " + std::to_string(vocab) + ")")
          .with_field("prompt");
    }
  }
  DI_RETURN_IF_ERROR(request.params.validate(vocab));
  if (request.params.n > options_.max_num_seqs) {
    return Status::Error("n = " + std::to_string(request.params.n) + " exceeds max-num-seqs (" +
                         std::to_string(options_.max_num_seqs) + ")")
        .with_field("n");
  }
  if (n_prompt >= max_model_len_) {
    return Status::Error("the prompt has " + std::to_string(n_prompt) + " tokens; the limit is " +
                         std::to_string(max_model_len_ - 1) + " (max model length " + std::to_string(max_model_len_) +
                         ", including output)")
        .with_field("prompt");
  }
  if (n_prompt + request.params.max_tokens > max_model_len_) {
    return Status::Error("prompt (" + std::to_string(n_prompt) + " tokens) + max_tokens (" +
                         std::to_string(request.params.max_tokens) + ") exceeds the max model length of " +
                         std::to_string(max_model_len_))
        .with_field("max_tokens");
  }
  return Status::Ok();
}

void EngineCore::add(uint64_t request_id, Request request, std::shared_ptr<OutputStream> stream,
                     RequestTiming::Clock::time_point arrival, std::vector<PinnedBlock> pinned) {
  RequestState r;
  r.pinned = std::move(pinned);
  const SamplingParams& p = request.params;
  r.seed = p.seed.value_or(splitmix64(options_.seed ^ splitmix64(request_id)));
  r.max_tokens = p.max_tokens > 0 ? p.max_tokens : max_model_len_ - int(request.prompt_token_ids.size());
  r.timing.arrival = arrival;
  r.stream = std::move(stream);
  auto seq = std::make_unique<Sequence>(next_seq_id_++, request_id, 0, request.priority, request_id,
                                        request.prompt_token_ids, kv_.n_kinds(), p.n - 1);
  grammars_.add(seq->id(), p.constraint);
  r.request = std::move(request);
  r.live.push_back(&scheduler_.add(std::move(seq)));
  DI_CHECK(requests_.emplace(request_id, std::move(r)).second);
}

void EngineCore::step() {
  SchedulerOutput out = scheduler_.schedule();
  const double draft_seconds = add_drafts(out);
  DI_CHECK(!out.chunks.empty());
  std::vector<int64_t> sampling;  // their next masks are computed during the forward pass
  for (const ScheduledChunk& c : out.chunks)
    if (c.sample) sampling.push_back(c.seq->id());
  grammars_.prefetch_masks(sampling);
  const auto forward_start = std::chrono::steady_clock::now();
  const std::span<const float> logits = runner_.execute(out);
  grammars_.join_masks();
  if (draft_seconds > 0) {
    int n_drafts = 0;
    for (const ScheduledChunk& c : out.chunks) n_drafts += c.sample ? c.n_logit_rows - 1 : 0;
    const std::chrono::duration<double> forward = std::chrono::steady_clock::now() - forward_start;
    if (n_drafts > 0 && forward.count() > 0) draft_gate_.record_draft_cost(draft_seconds, n_drafts, forward.count());
  }
  if (group_ && !group_->health().ok()) {
    finish_all(FinishReason::kError);
    return;
  }
  const size_t vocab = size_t(model_.info().vocab_size);

  // Verify drafts before update() files the step's blocks: position by position, sample as
  // plain decoding would; keep drafts while they equal the sample before them.
  std::vector<std::vector<SampledToken>> verified(out.chunks.size());
  std::vector<size_t> first_row(out.chunks.size());  // of each sampling chunk's logits
  size_t row = 0;
  for (size_t i = 0; i < out.chunks.size(); ++i) {
    ScheduledChunk& c = out.chunks[i];
    first_row[i] = row;
    if (!c.sample) continue;
    if (c.n_logit_rows == 1) {
      ++row;
      continue;
    }
    Sequence& seq = *c.seq;
    const RequestState& r = requests_.at(seq.request_id());
    const int k = c.n_logit_rows - 1, n_base = seq.n_tokens() - k;
    for (int j = 0; j <= k; ++j) {
      verified[i].push_back(grammars_.sample(sampler_, seq.id(), logits.subspan((row + size_t(j)) * vocab, vocab),
                                             r.request.params, seq.tokens().first(size_t(n_base + j)), seq.n_prompt(),
                                             model_.info().eos_token_ids, r.seed, seq.sample_index()));
      const SampledToken& last = verified[i].back();
      if (j == k || last.token != seq.tokens()[size_t(n_base + j)] || last.grammar_finish != FinishReason::kNone) break;
    }
    row += size_t(c.n_logit_rows);
    const int n_accepted = int(verified[i].size()) - 1;
    n_draft_tokens_ += uint64_t(k);
    n_accepted_draft_tokens_ += uint64_t(n_accepted);
    for (int j = 0; j < k; ++j) ++n_drafts_at_[size_t(j)];
    for (int j = 0; j < n_accepted; ++j) ++n_accepted_at_[size_t(j)];
    draft_gate_.record(seq.id(), k, n_accepted);
    kv_.truncate(seq, n_base + n_accepted);
    c.n_new = 1 + n_accepted;  // positions [n_base - 1, n_base + n_accepted) hold accepted tokens' KV
    c.n_logit_rows = 1;
  }
  scheduler_.update(out);
  ++n_steps_;
  n_computed_tokens_ += uint64_t(out.n_tokens());

  const auto now = RequestTiming::Clock::now();
  for (size_t i = 0; i < out.chunks.size(); ++i) {
    const ScheduledChunk& c = out.chunks[i];
    Sequence& seq = *c.seq;
    const uint64_t request_id = seq.request_id();
    RequestState& r = requests_.at(request_id);
    if (r.timing.first_scheduled == RequestTiming::Clock::time_point{}) {
      r.timing.first_scheduled = now;
      r.n_cached_tokens = seq.n_cached_prompt();
      unpin(r.pinned);  // admitted: the sequence holds its own references now
      r.pinned.clear();
    }
    if (!c.sample) continue;
    if (!verified[i].empty()) {
      // Accepted drafts are in seq already; the last sample is new.
      const int n_accepted = int(verified[i].size()) - 1, n_base = seq.n_tokens() - n_accepted;
      bool live = true;
      for (int j = 0; j < n_accepted && live; ++j)
        live = emit_accepted(r, seq, n_base + j, std::move(verified[i][size_t(j)]), now);
      if (live) emit(r, seq, std::move(verified[i].back()), now);
      if (r.live.empty()) requests_.erase(request_id);
      continue;
    }
    const auto row_logits = logits.subspan(first_row[i] * vocab, vocab);
    // A first token for every sample: fork the samples still to come from this one.
    std::vector<Sequence*> samples = {&seq};
    while (seq.n_pending_forks() > 0) {
      const int index = r.request.params.n - seq.n_pending_forks();
      Sequence& child = scheduler_.fork(seq, next_seq_id_++, index);
      grammars_.fork(seq.id(), child.id());
      r.live.push_back(&child);
      samples.push_back(&child);
    }
    for (Sequence* s : samples) {
      emit(r, *s,
           grammars_.sample(sampler_, s->id(), row_logits, r.request.params, s->tokens(), s->n_prompt(),
                            model_.info().eos_token_ids, r.seed, s->sample_index()),
           now);
    }
    if (r.live.empty()) requests_.erase(request_id);
  }
}

void EngineCore::step_idle() { runner_.execute(SchedulerOutput{}); }

void EngineCore::set_drafter(std::unique_ptr<Drafter> drafter) {
  DI_CHECK(drafter_ && drafter);
  drafter_ = std::move(drafter);
}

double EngineCore::add_drafts(SchedulerOutput& out) {
  if (!drafter_) return 0;
  auto decodes_one = [](const ScheduledChunk& c) {
    return c.sample && c.n_new == 1 && c.seq->n_uncomputed() == 1 && c.seq->n_pending_forks() == 0;
  };
  const auto n_decoding = std::count_if(out.chunks.begin(), out.chunks.end(), decodes_one);
  if (n_decoding == 0 || n_decoding > options_.speculative_max_batch) return 0;
  int budget = options_.max_num_batched_tokens - out.n_tokens();
  if (budget <= 0) return 0;
  std::vector<ScheduledChunk*> chunks;
  std::vector<DraftTarget> targets;
  for (ScheduledChunk& c : out.chunks) {
    if (!decodes_one(c)) continue;
    const Sequence& seq = *c.seq;
    const RequestState& r = requests_.at(seq.request_id());
    const int k_max = std::min({options_.num_speculative_tokens, r.max_tokens - seq.n_output() - 1,
                                max_model_len_ - seq.n_tokens()});
    const int k = k_max <= 0 ? 0 : draft_gate_.draft_length(seq.id(), k_max);
    if (k == 0) continue;
    chunks.push_back(&c);
    targets.push_back({&seq, k});
  }
  if (targets.empty()) return 0;
  // A drafter may read the cache: the step's block copies (a fork's copied blocks) go first.
  cache_->copy_blocks(out.block_copies);
  out.block_copies.clear();
  const auto draft_start = std::chrono::steady_clock::now();
  const std::vector<std::vector<int32_t>> drafts = drafter_->propose(targets);
  const std::chrono::duration<double> draft_seconds = std::chrono::steady_clock::now() - draft_start;
  for (size_t i = 0; i < chunks.size() && budget > 0; ++i) {
    ScheduledChunk& c = *chunks[i];
    Sequence& seq = *c.seq;
    const int n_draft = std::min(int(drafts[i].size()), budget);  // a prefix of the drafts is a draft
    if (n_draft == 0) continue;
    const int n_base = seq.n_tokens();
    for (int j = 0; j < n_draft; ++j) seq.append_token(drafts[i][size_t(j)]);
    if (!kv_.allocate(seq, 1 + n_draft, out.block_copies)) {
      kv_.truncate(seq, n_base);
      continue;
    }
    c.n_new = 1 + n_draft;
    c.n_logit_rows = c.n_new;
    budget -= n_draft;
  }
  return draft_seconds.count();
}

void EngineCore::emit(RequestState& r, Sequence& seq, SampledToken sampled, RequestTiming::Clock::time_point now) {
  seq.append_token(sampled.token);
  emit_accepted(r, seq, seq.n_tokens() - 1, std::move(sampled), now);
}

bool EngineCore::emit_accepted(RequestState& r, Sequence& seq, int token_index, SampledToken sampled,
                               RequestTiming::Clock::time_point now) {
  DI_CHECK(seq.tokens()[size_t(token_index)] == sampled.token);
  ++n_generated_tokens_;
  if (r.timing.first_token == RequestTiming::Clock::time_point{}) r.timing.first_token = now;
  RequestOutput out;
  out.request_id = seq.request_id();
  out.sample_index = seq.sample_index();
  out.token_ids = {sampled.token};
  if (r.request.params.wants_logprobs()) out.logprobs.push_back({sampled.logprob, std::move(sampled.top)});
  out.n_prompt_tokens = seq.n_prompt();
  out.n_cached_tokens = r.n_cached_tokens;
  out.finish_reason = sampled.grammar_finish != FinishReason::kNone
                          ? sampled.grammar_finish
                          : stop_reason(r, sampled.token, token_index + 1 - seq.n_prompt());
  const bool finished = out.finished();
  if (finished) finish_sample(r, seq, out.finish_reason, now);
  out.timing = r.timing;
  r.stream->push(std::move(out));
  return !finished;
}

FinishReason EngineCore::stop_reason(const RequestState& r, int32_t last, int n_output) const {
  const SamplingParams& p = r.request.params;
  if (!p.ignore_eos && contains(model_.info().eos_token_ids, last)) return FinishReason::kStop;
  if (contains(p.stop_token_ids, last)) return FinishReason::kStop;
  if (n_output >= r.max_tokens) return FinishReason::kLength;
  return FinishReason::kNone;
}

void EngineCore::finish_sample(RequestState& r, Sequence& seq, FinishReason reason,
                               RequestTiming::Clock::time_point now) {
  r.live.erase(std::find(r.live.begin(), r.live.end(), &seq));
  grammars_.remove(seq.id());
  draft_gate_.remove(seq.id());
  scheduler_.finish(seq, reason);
  if (r.live.empty()) r.timing.finished = now;
}

void EngineCore::abort(uint64_t request_id) {
  auto it = requests_.find(request_id);
  if (it != requests_.end()) finish_request(it, FinishReason::kAbort);
}

void EngineCore::finish_all(FinishReason reason) {
  while (!requests_.empty()) finish_request(requests_.begin(), reason);
}

void EngineCore::finish_request(std::map<uint64_t, RequestState>::iterator it, FinishReason reason) {
  RequestState& r = it->second;
  const auto now = RequestTiming::Clock::now();
  // Samples not forked yet finish too: the stream expects params.n last updates.
  int n_unforked = 0;
  for (const Sequence* s : r.live) n_unforked += s->n_pending_forks();
  std::vector<int> indices;
  for (const Sequence* s : r.live) indices.push_back(s->sample_index());
  for (int i = 0; i < n_unforked; ++i) indices.push_back(r.request.params.n - n_unforked + i);
  while (!r.live.empty()) finish_sample(r, *r.live.back(), reason, now);
  unpin(r.pinned);
  for (int index : indices) {
    RequestOutput out;
    out.request_id = it->first;
    out.sample_index = index;
    out.finish_reason = reason;
    out.n_prompt_tokens = int(r.request.prompt_token_ids.size());
    out.n_cached_tokens = r.n_cached_tokens;
    out.timing = r.timing;
    r.stream->push(std::move(out));
  }
  requests_.erase(it);
}

EngineStats EngineCore::stats() const {
  EngineStats s;
  s.n_waiting = scheduler_.n_waiting();
  s.n_running = scheduler_.n_running();
  for (int k = 0; k < kv_.n_kinds(); ++k) {
    s.n_kv_blocks += kv_.pool(k).n_blocks();
    s.n_kv_blocks_free += kv_.pool(k).n_free();
  }
  s.n_kv_blocks_pinned = n_pinned_blocks_;
  s.kv_usage = kv_.usage();
  s.n_prefix_query_tokens = kv_.prefix_stats().n_query_tokens;
  s.n_prefix_hit_tokens = kv_.prefix_stats().n_hit_tokens;
  s.n_preemptions = scheduler_.n_preemptions();
  s.n_steps = n_steps_;
  s.n_computed_tokens = n_computed_tokens_;
  s.n_generated_tokens = n_generated_tokens_;
  s.n_draft_tokens = n_draft_tokens_;
  s.n_accepted_draft_tokens = n_accepted_draft_tokens_;
  s.n_drafts_at = n_drafts_at_;
  s.n_accepted_at = n_accepted_at_;
  s.n_draft_paused_steps = draft_gate_.n_paused_steps();
  return s;
}

namespace {

// Chained hashes of the first n_blocks blocks of tokens, all of them prompt tokens.
std::vector<BlockHash> prefix_hashes(std::span<const int32_t> tokens, int n_blocks, int block_size) {
  DI_CHECK(size_t(n_blocks) * size_t(block_size) <= tokens.size());
  std::vector<BlockHash> hashes;
  for (size_t i = 0; i < size_t(n_blocks); ++i)
    hashes.push_back(hash_block(i == 0 ? nullptr : &hashes[i - 1], tokens.subspan(i * size_t(block_size), size_t(block_size))));
  return hashes;
}

}  // namespace

std::vector<PinnedBlock> EngineCore::prefix_hit_slots(int n_blocks) const {
  std::vector<PinnedBlock> slots;
  for (const auto& [kind, index] : kv_.prefix_hit_slots(n_blocks)) slots.push_back({kind, index, -1});
  return slots;
}

std::optional<PrefixReservation> EngineCore::reserve_prefix(std::span<const int32_t> tokens, int n_blocks) {
  if (!kv_.prefix_caching()) return std::nullopt;
  const std::vector<BlockHash> hashes = prefix_hashes(tokens, n_blocks, options_.block_size);
  PrefixReservation r;
  std::vector<int> n_fresh(size_t(kv_.n_kinds()), 0);
  for (const PinnedBlock& slot : prefix_hit_slots(n_blocks)) {
    if (auto b = kv_.pin_filed(slot.kind, hashes[size_t(slot.index)])) {
      r.held.push_back({slot.kind, slot.index, *b});
      ++n_pinned_blocks_;
    } else {
      r.receive.push_back(slot);
      ++n_fresh[slot.kind];
    }
  }
  std::vector<std::vector<int32_t>> fresh(size_t(kv_.n_kinds()));
  for (uint32_t k = 0; k < fresh.size(); ++k) {
    if (!kv_.allocate_unfiled(k, n_fresh[k], fresh[k])) {
      for (uint32_t j = 0; j < k; ++j)
        for (int32_t b : fresh[j]) kv_.unpin(j, b);
      unpin(r.held);
      return std::nullopt;
    }
  }
  std::vector<size_t> next(fresh.size(), 0);
  for (PinnedBlock& b : r.receive) b.block = fresh[b.kind][next[b.kind]++];
  n_pinned_blocks_ += int(r.receive.size());
  return r;
}

std::vector<PinnedBlock> EngineCore::import_prefix(std::span<const int32_t> tokens, const PrefixReservation& reservation) {
  int n_blocks = 0;
  for (const PinnedBlock& b : reservation.receive) n_blocks = std::max(n_blocks, b.index + 1);
  const std::vector<BlockHash> hashes = prefix_hashes(tokens, n_blocks, options_.block_size);
  std::vector<PinnedBlock> pinned = reservation.held;
  for (const PinnedBlock& b : reservation.receive)
    pinned.push_back({b.kind, b.index, kv_.file_held(b.kind, b.block, hashes[size_t(b.index)])});
  return pinned;
}

std::optional<std::vector<PinnedBlock>> EngineCore::pin_prefix(std::span<const int32_t> tokens,
                                                               std::span<const PinnedBlock> slots) {
  int n_blocks = 0;
  for (const PinnedBlock& s : slots) n_blocks = std::max(n_blocks, s.index + 1);
  const std::vector<BlockHash> hashes = prefix_hashes(tokens, n_blocks, options_.block_size);
  std::vector<PinnedBlock> pinned;
  for (const PinnedBlock& s : slots) {
    DI_CHECK(s.kind < uint32_t(kv_.n_kinds()) && s.index >= 0);
    const auto b = kv_.pin_filed(s.kind, hashes[size_t(s.index)]);
    if (!b) {
      for (const PinnedBlock& p : pinned) kv_.unpin(p.kind, p.block);
      return std::nullopt;
    }
    pinned.push_back({s.kind, s.index, *b});
  }
  n_pinned_blocks_ += int(pinned.size());
  return pinned;
}

void EngineCore::unpin(std::span<const PinnedBlock> blocks) {
  for (const PinnedBlock& b : blocks) kv_.unpin(b.kind, b.block);
  n_pinned_blocks_ -= int(blocks.size());
  DI_CHECK(n_pinned_blocks_ >= 0);
}

}  // namespace deepinfer
