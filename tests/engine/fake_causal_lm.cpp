#include "fake_causal_lm.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "core/check.h"

namespace deepinfer::test {

namespace {

constexpr int32_t kMagic = 0x5EC7;

struct Record {
  int32_t token, position, layer, magic;
};

uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

size_t bytes_per_token(DType dtype) { return MlaCacheLayout{dtype, 8, 4}.bytes_per_token(); }

uint8_t* slot(const KvCacheView& kv, int kind, int layer, const BatchSequence& s, int position) {
  const int32_t block = s.block_tables[size_t(kind)][position / kv.block_size];
  DI_CHECK(block >= 0 && block < kv.kinds[size_t(kind)].n_blocks);
  return kv.kinds[size_t(kind)].block(layer, block) + size_t(position % kv.block_size) * bytes_per_token(kv.dtype);
}

void logits_from_hash(uint64_t h, std::span<float> logits) {
  for (size_t v = 0; v < logits.size(); ++v) {
    logits[v] = float(mix(h ^ (v * 0x9E3779B97F4A7C15ull)) >> 40) * (8.0f / float(1 << 24)) - 4.0f;
  }
}

uint64_t absorb(uint64_t h, int32_t token) { return mix(h + uint64_t(uint32_t(token)) + 0x632BE59BD9B4E019ull); }

}  // namespace

FakeCausalLM::FakeCausalLM(int vocab_size, int n_layers, std::vector<int32_t> eos, int window_lookback)
    : window_lookback_(window_lookback) {
  info_.architecture = "FakeForCausalLM";
  info_.vocab_size = vocab_size;
  info_.n_layers = n_layers;
  info_.max_position_embeddings = 4096;
  info_.eos_token_ids = std::move(eos);
}

Result<std::vector<KvKindSpec>> FakeCausalLM::kv_kinds(DType cache_dtype, int block_size) const {
  const size_t block_bytes = size_t(block_size) * bytes_per_token(cache_dtype);
  std::vector<KvKindSpec> kinds{{"records", info_.n_layers, block_bytes, 0}};
  if (window_lookback_ > 0) kinds.push_back({"window records", info_.n_layers, block_bytes, window_lookback_});
  return kinds;
}

void FakeCausalLM::reference_logits(std::span<const int32_t> tokens, std::span<float> logits) {
  uint64_t h = 0;
  for (int32_t t : tokens) h = absorb(h, t);
  logits_from_hash(h, logits);
}

void FakeCausalLM::forward(const ForwardBatch& batch, const KvCacheView& kv, float* logits) {
  const size_t n_kinds = window_lookback_ > 0 ? 2 : 1;
  DI_CHECK(bytes_per_token(kv.dtype) >= sizeof(Record) && kv.kinds.size() == n_kinds);
  if (forward_delay.count() > 0) std::this_thread::sleep_for(forward_delay);
  ++n_forward_calls;
  n_rows += int64_t(batch.n_rows());
  max_rows = std::max(max_rows, int64_t(batch.n_rows()));
  // Write every row's KV first (as a real model does per layer), then attend.
  int32_t expected_row = 0;
  for (const BatchSequence& s : batch.seqs) {
    DI_CHECK(s.row_begin == expected_row && s.n_new >= 1 && s.n_ctx >= s.n_new);
    expected_row += s.n_new;
    for (int32_t r = s.row_begin; r < s.row_begin + s.n_new; ++r) {
      const int32_t pos = batch.positions[size_t(r)];
      DI_CHECK(pos == s.n_ctx - s.n_new + (r - s.row_begin));
      DI_CHECK(batch.token_ids[size_t(r)] >= 0 && batch.token_ids[size_t(r)] < info_.vocab_size);
      for (int l = 0; l < info_.n_layers; ++l) {
        const Record rec{batch.token_ids[size_t(r)], pos, l, kMagic};
        for (size_t k = 0; k < n_kinds; ++k) std::memcpy(slot(kv, int(k), l, s, pos), &rec, sizeof(rec));
      }
    }
  }
  DI_CHECK(size_t(expected_row) == batch.n_rows());
  size_t out = 0;
  size_t si = 0;
  for (int32_t row : batch.logit_rows) {
    while (batch.seqs[si].row_begin + batch.seqs[si].n_new <= row) ++si;
    const BatchSequence& s = batch.seqs[si];
    const int32_t pos = batch.positions[size_t(row)];
    uint64_t h = 0;
    int32_t last = -1;
    const int32_t window_first = std::max(0, s.n_ctx - s.n_new - window_lookback_);
    for (int32_t p = 0; p <= pos; ++p) {
      int32_t token = -1;
      for (size_t k = 0; k < n_kinds; ++k) {
        if (k == 1 && p < window_first) continue;
        for (int l = 0; l < info_.n_layers; ++l) {
          Record rec;
          std::memcpy(&rec, slot(kv, int(k), l, s, p), sizeof(Record));
          DI_CHECK_MSG(rec.position == p && rec.layer == l && rec.magic == kMagic,
                       "kind %zu position %d layer %d holds the KV of position %d layer %d", k, p, l, rec.position,
                       rec.layer);
          DI_CHECK(token == -1 || rec.token == token);
          token = rec.token;
        }
      }
      h = absorb(h, token);
      last = token;
    }
    const std::span<float> row_logits(logits + out * size_t(info_.vocab_size), size_t(info_.vocab_size));
    logits_from_hash(h, row_logits);
    if (cycle > 0) row_logits[size_t(2 + (last - 2 + 1 + cycle) % cycle)] += 100.0f;
    ++out;
  }
}

void FakeCausalLM::draft(std::span<const DraftQuery> queries, const KvCacheView& kv, int32_t* drafts) {
  DI_CHECK(drafting);
  std::vector<float> logits(static_cast<size_t>(info_.vocab_size));
  for (const DraftQuery& q : queries) {
    ++n_draft_queries;
    BatchSequence s{0, 1, q.n_ctx, q.block_tables};
    std::vector<int32_t> tokens;
    for (int32_t p = 0; p < q.n_ctx; ++p) {
      Record rec;
      std::memcpy(&rec, slot(kv, 0, 0, s, p), sizeof(Record));
      DI_CHECK(rec.position == p && rec.layer == 0 && rec.magic == kMagic);
      tokens.push_back(rec.token);
    }
    tokens.push_back(q.token);
    for (int j = 0; j < q.n_drafts; ++j) {
      reference_logits(tokens, logits);
      const int32_t last = tokens.back();
      if (cycle > 0) logits[size_t(2 + (last - 2 + 1 + cycle) % cycle)] += 100.0f;
      const int32_t best = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
      tokens.push_back(drafts_wrong ? (best + 1) % info_.vocab_size : best);
      *drafts++ = tokens.back();
    }
  }
}

}  // namespace deepinfer::test
