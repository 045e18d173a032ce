// model_bench: decode tokens/s at many concurrent sequences and context lengths, prefill tokens/s
// and time to first token, for one checkpoint on the CPU backend; prints Markdown tables.
//
// Decode at context L and batch B: B sequences whose caches hold L positions, each step adding
// one token per sequence with logits for every row (as a serving step does). Cache contents
// are synthetic (a constant byte pattern, finite in every layout): the kernels' work does not
// depend on the values, and filling 256 x 4096 positions by prefill would take hours here.
// The batch-1 roofline columns divide the bytes a decoded token must read (active weights and
// its KV) by the step's wall time, and by the CPU time of all its threads: on a shared machine
// the latter, run on one thread, compares with read_bandwidth_bench on one thread.
// Prefill runs the prompt as prompt rows (DeepSeek-V2/V3: expanded MLA) and, with
// --prefill-formulations expanded,absorbed (the default), the same prompt again as generated rows
// (absorbed MLA), alternating --prefill-repeats times, for the ratio of the two in one run.
// --verify-rows times steps with several new rows per sequence, all with logits: the cost of
// verifying speculative drafts, and so the speedup a draft that is always right would give.
// Any architecture load_causal_lm reads runs, with the cache kinds it names (CausalLM::kv_kinds);
// the roofline columns need a weight walk (DeepSeek-V2/V3, V4 and V4.1 have one).
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "kernels/cpu/isa.h"
#include "model/deepseek/model.h"
#include "model/deepseek_v4/model.h"
#include "model/deepseek_v41/model.h"
#include "model/fp4_weight.h"
#include "model/loader.h"

namespace deepinfer {
namespace {

using Clock = std::chrono::steady_clock;

size_t weight_bytes(const LinearWeight& w) {
  if (!w.data) return 0;  // not bound (unused at this layer)
  size_t b = w.scale_e8m0 ? fp4_weight_bytes(w) : weight_data_bytes(w);
  if (w.scale_inv) b += size_t(((w.n_out + w.block_rows - 1) / w.block_rows) * ((w.n_in + w.block_cols - 1) / w.block_cols)) * 4;
  return b;
}

size_t mlp_bytes(const MlpWeights& m) { return weight_bytes(m.gate) + weight_bytes(m.up) + weight_bytes(m.down); }

// Weight bytes one token reads: attention, dense MLPs, router + shared + top_k routed experts, lm_head.
size_t active_weight_bytes(const DeepseekModel& m) {
  const DeepseekWeights& w = m.weights();
  const ModelConfig& c = m.config();
  size_t total = weight_bytes(w.lm_head) + size_t(c.hidden_size) * dtype_size(w.embed.dtype);
  for (const LayerWeights& l : w.layers) {
    const MlaWeights& a = l.attn;
    total += c.q_lora_rank > 0 ? weight_bytes(a.q_a_proj) + weight_bytes(a.q_b_proj) : weight_bytes(a.q_proj);
    total += weight_bytes(a.kv_a_proj) + weight_bytes(a.kv_b_proj) + weight_bytes(a.o_proj);
    if (!l.is_moe) {
      total += mlp_bytes(l.mlp);
    } else {
      total += weight_bytes(l.moe.router) + (l.moe.has_shared ? mlp_bytes(l.moe.shared) : 0);
      total += size_t(c.num_experts_per_tok) * mlp_bytes(l.moe.experts[0]);
    }
  }
  return total;
}

size_t expert_bytes(const ExpertWeights& e) { return weight_bytes(e.w1) + weight_bytes(e.w3) + weight_bytes(e.w2); }

size_t compressor_bytes(const CompressorWeights& c) { return weight_bytes(c.wkv) + weight_bytes(c.wgate); }

// The linear weights of a V4 or V4.1 layer that every token reads, the routed experts but
// top_k of one expert. (V4.1's engram table rows, a few KB per token, are left out.)
template <class Block>
size_t v4_block_bytes(const Block& l, int top_k) {
  const auto& a = l.attn;
  size_t total = weight_bytes(a.wq_a) + weight_bytes(a.wq_b) + weight_bytes(a.wkv) + weight_bytes(a.wo_b);
  for (const LinearWeight& w : a.wo_a) total += weight_bytes(w);
  total += compressor_bytes(a.compressor) + weight_bytes(a.indexer.wq_b) + weight_bytes(a.indexer.weights_proj) +
           compressor_bytes(a.indexer.compressor);
  total += weight_bytes(l.hc_attn.fn) + weight_bytes(l.hc_ffn.fn) + weight_bytes(l.gate);
  if (l.has_shared) total += expert_bytes(l.shared);
  return total + size_t(top_k) * expert_bytes(l.experts.front());
}

// Weight bytes one token reads in a DeepSeek-V4 (with its head's hyper-connection) or V4.1 model.
size_t active_weight_bytes(const DeepseekV4Model& m) {
  const DeepseekV4Weights& w = m.weights();
  size_t total = weight_bytes(w.head) + size_t(m.config().hidden_size) * dtype_size(w.embed.dtype) + weight_bytes(w.hc_head.fn);
  for (const V4BlockWeights& l : w.layers) total += v4_block_bytes(l, m.config().num_experts_per_tok);
  return total;
}
size_t active_weight_bytes(const DeepseekV41Model& m) {
  const DeepseekV41Weights& w = m.weights();
  size_t total = weight_bytes(w.head) + size_t(m.config().hidden_size) * dtype_size(w.embed.dtype);
  for (const V41BlockWeights& l : w.layers) {
    total += v4_block_bytes(l, m.config().num_experts_per_tok) + weight_bytes(l.attn.index_wk);
    if (l.has_engram) total += weight_bytes(l.engram.wkv);
  }
  return total;
}

// A paged cache of the model's kinds for n_seqs sequences whose steps start at position `first`
// and reach max_len tokens: distinct blocks per sequence; a lookback kind gets only the blocks
// such a step reads (its earlier table entries are -1, as the engine leaves them).
struct BenchCache {
  static constexpr int kBlock = 64;
  KvCacheView view;
  std::vector<std::vector<uint8_t>> storage;             // [kind * slab]
  std::vector<std::vector<std::vector<int32_t>>> tables;  // [kind][seq]
  BenchCache(const std::vector<KvKindSpec>& kinds, DType dtype, int n_seqs, int first, int max_len) {
    view.dtype = dtype;
    view.block_size = kBlock;
    const int n_table = (max_len + kBlock - 1) / kBlock;
    tables.resize(kinds.size());
    for (size_t k = 0; k < kinds.size(); ++k) {
      const int live = kinds[k].lookback > 0 ? std::max(0, first - kinds[k].lookback) / kBlock : 0;
      const int per_seq = n_table - live;
      KvKindView kv{per_seq * n_seqs, kinds[k].bytes_per_block, {}};
      for (int sl = 0; sl < kinds[k].n_slabs; ++sl) {
        storage.emplace_back(size_t(kv.n_blocks) * kv.bytes_per_block);
        std::memset(storage.back().data(), 0x11, storage.back().size());  // small finite bf16, fp8 and f32 values
        kv.slab_base.push_back(storage.back().data());
      }
      view.kinds.push_back(std::move(kv));
      tables[k].assign(size_t(n_seqs), std::vector<int32_t>(size_t(live), -1));
      for (int b = 0; b < per_seq; ++b)
        for (int sq = 0; sq < n_seqs; ++sq) tables[k][size_t(sq)].push_back(b * n_seqs + sq);
    }
  }
  BatchSequence sequence(int s, int32_t row_begin, int32_t n_new, int32_t n_ctx) const {
    BatchSequence bs{row_begin, n_new, n_ctx, {}};
    for (size_t k = 0; k < tables.size(); ++k) bs.block_tables[k] = tables[k][size_t(s)].data();
    return bs;
  }
};

// Resident bytes of this process now (/proc/self/statm), to measure what a cache really holds.
size_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t pages = 0, resident = 0;
  f >> pages >> resident;
  return resident * size_t(sysconf(_SC_PAGESIZE));
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// CPU seconds used by all threads of this process so far (user + system).
double process_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// Mean wall and CPU seconds of `steps` decode steps (after one warm-up) in which each of `batch`
// sequences at context `ctx` gets `rows` new positions, all with logits: rows > 1 is what
// verifying rows - 1 speculative drafts costs.
struct StepTime {
  double wall_s = 0, cpu_s = 0;
};

template <class RandomToken>
StepTime time_decode(CausalLM& m, const BenchCache& cache, int batch, int ctx, int rows, int steps,
                     RandomToken& random_token) {
  std::vector<float> logits(size_t(batch) * size_t(rows) * size_t(m.info().vocab_size));
  StepTime t;
  for (int step = 0; step <= steps; ++step) {  // step 0 warms up
    ForwardBatch b;
    const int32_t first = ctx + step * rows;
    for (int s = 0; s < batch; ++s) {
      b.seqs.push_back(cache.sequence(s, int32_t(b.n_rows()), rows, first + rows));
      for (int r = 0; r < rows; ++r) {
        b.logit_rows.push_back(int32_t(b.n_rows()));
        b.token_ids.push_back(random_token());
        b.positions.push_back(first + r);
      }
    }
    const auto t0 = Clock::now();
    const double c0 = process_cpu_seconds();
    m.forward(b, cache.view, logits.data());
    if (step > 0) {
      t.wall_s += seconds_since(t0) / steps;
      t.cpu_s += (process_cpu_seconds() - c0) / steps;
    }
  }
  return t;
}

struct Options {
  std::string model_dir;
  std::string kv = "bf16";
  std::string activations = "f32";
  std::vector<int> batches = {1, 8, 32, 64, 128, 256};
  std::vector<int> contexts = {512, 4096};
  std::vector<int> prompts = {512, 2048};
  std::vector<int> verify_rows;  // > 1: rows per sequence of a speculative verification step
  std::vector<std::string> prefill_formulations = {"expanded", "absorbed"};
  int prefill_repeats = 1;
  std::string lm_head = "stored";
  bool no_weight_relay = false;
  int steps = 3;
  double max_kv_gib = 6.0;
};

int run(const Options& o) {
  ModelOptions options;
  options.activation_dtype = o.activations == "bf16" ? DType::BF16 : DType::F32;
  if (o.lm_head != "stored") options.lm_head_dtype = o.lm_head == "int8" ? DType::I8_SM : DType::F8_E4M3;
  options.relay_weights = !o.no_weight_relay;
  auto loaded = load_causal_lm(o.model_dir, options, cpu_backend());
  if (!loaded.ok()) {
    std::fprintf(stderr, "error: %s\n", loaded.status().message().c_str());
    return 1;
  }
  CausalLM& m = **loaded;
  const CausalLMInfo& info = m.info();
  const auto* v3 = dynamic_cast<const DeepseekModel*>(&m);
  const auto* v4 = dynamic_cast<const DeepseekV4Model*>(&m);
  const auto* v41 = dynamic_cast<const DeepseekV41Model*>(&m);
  const DType kv_dtype = o.kv == "fp8" ? DType::F8_E4M3 : o.kv == "f32" ? DType::F32 : DType::BF16;
  auto kinds_or = m.kv_kinds(kv_dtype, BenchCache::kBlock);
  if (!kinds_or.ok()) {
    std::fprintf(stderr, "error: %s\n", kinds_or.status().message().c_str());
    return 1;
  }
  const std::vector<KvKindSpec> kinds = *kinds_or;
  const double kv_per_token = kv_bytes_per_token(kinds, BenchCache::kBlock);
  const size_t kv_per_seq = kv_bytes_per_sequence_window(kinds, BenchCache::kBlock);
  const size_t w_active = v3 ? active_weight_bytes(*v3) : v4 ? active_weight_bytes(*v4) : v41 ? active_weight_bytes(*v41) : 0;
  std::printf("load: %s\n", describe_causal_lm(m, BenchCache::kBlock).c_str());
  std::printf("model %s: %.2f GB of weights, %.3f GB read per token at batch 1 (active weights), "
              "KV %s %.1f B/token + %zu B/sequence, %s activations, lm_head %s, isa %s, threads %d\n\n",
              o.model_dir.c_str(), double(info.n_weight_bytes) / 1e9, double(w_active) / 1e9, o.kv.c_str(),
              kv_per_token, kv_per_seq, o.activations.c_str(), o.lm_head.c_str(), std::string(cpu::isa_name(cpu::active_isa())).c_str(),
              omp_get_max_threads());
  std::mt19937 rng(7);
  auto random_token = [&] { return int32_t(rng() % uint32_t(info.vocab_size - 2) + 2); };

  std::vector<std::string> kv_rows;  // resident cache bytes of each decode configuration
  std::printf("| context | batch | step ms | decode tok/s | CPU s per step | batch 1: GB/s (weights + KV) | batch 1: GB per CPU s |\n"
              "|---|---|---|---|---|---|---|\n");
  for (int ctx : o.contexts)
    for (int batch : o.batches) {
      const int max_len = ctx + o.steps + 1;
      const double kv_gib = double(batch) * (max_len * kv_per_token + double(kv_per_seq)) / double(1 << 30);
      if (kv_gib > o.max_kv_gib) {
        std::printf("| %d | %d | skipped: KV %.1f GiB > --max-kv-gib | | | | |\n", ctx, batch, kv_gib);
        continue;
      }
      const size_t rss0 = resident_bytes();
      BenchCache cache(kinds, kv_dtype, batch, ctx, max_len);
      {
        const size_t grown = resident_bytes() - rss0;
        const double tokens = double(batch) * max_len;
        char buf[256];
        std::snprintf(buf, sizeof buf, "| %d | %d | %.0f | %zu | %.1f | %.1f |", ctx, batch, tokens, grown,
                      double(grown) / tokens, kv_per_token + double(kv_per_seq) / max_len);
        kv_rows.push_back(buf);
      }
      const StepTime t = time_decode(m, cache, batch, ctx, 1, o.steps, random_token);
      const double step_s = t.wall_s, step_cpu = t.cpu_s;
      std::string roofline = " | ";
      if (batch == 1 && w_active > 0) {
        const double bytes = double(w_active) + double(ctx) * kv_per_token;
        char buf[96];
        std::snprintf(buf, sizeof buf, "%.1f | %.1f", bytes / step_s / 1e9, bytes / step_cpu / 1e9);
        roofline = buf;
      }
      std::printf("| %d | %d | %.1f | %.1f | %.2f | %s |\n", ctx, batch, step_s * 1e3, batch / step_s, step_cpu,
                  roofline.c_str());
      std::fflush(stdout);
    }

  if (!o.verify_rows.empty()) {
    const int ctx = o.contexts.front();
    std::printf("\n| context | batch | rows per sequence (1 + drafts) | step ms | CPU s per step | CPU s vs 1 row | "
                "all-accepted tok/s (wall) | all-accepted speedup (CPU) |\n|---|---|---|---|---|---|---|---|\n");
    for (int batch : o.batches) {
      int max_rows = 1;
      for (int r : o.verify_rows) max_rows = std::max(max_rows, r);
      BenchCache cache(kinds, kv_dtype, batch, ctx, ctx + (o.steps + 1) * max_rows);
      const StepTime one = time_decode(m, cache, batch, ctx, 1, o.steps, random_token);
      for (int rows : o.verify_rows) {
        const StepTime t = rows == 1 ? one : time_decode(m, cache, batch, ctx, rows, o.steps, random_token);
        std::printf("| %d | %d | %d | %.1f | %.3f | %.2fx | %.1f | %.2fx |\n", ctx, batch, rows, t.wall_s * 1e3,
                    t.cpu_s, t.cpu_s / one.cpu_s, batch * rows / t.wall_s, rows * one.cpu_s / t.cpu_s);
        std::fflush(stdout);
      }
    }
  }

  std::printf("\n| prompt tokens | rows as | prefill s (= time to first token) | prefill tok/s | CPU s |\n"
              "|---|---|---|---|---|\n");
  for (int n : o.prompts) {
    if (n <= 0) continue;
    BenchCache cache(kinds, kv_dtype, 1, 0, n + 1);
    ForwardBatch b;
    for (int i = 0; i < n; ++i) {
      b.token_ids.push_back(random_token());
      b.positions.push_back(i);
    }
    b.seqs.push_back(cache.sequence(0, 0, int32_t(n), int32_t(n)));
    b.logit_rows.push_back(n - 1);
    std::vector<float> logits(size_t(info.vocab_size));
    for (int rep = 0; rep < o.prefill_repeats; ++rep)
      for (const std::string& f : o.prefill_formulations) {
        // expanded: prompt rows; absorbed: the same rows as generated ones
        b.prompt_rows.assign(f == "expanded" ? size_t(n) : 0, 1);
        const auto t0 = Clock::now();
        const double c0 = process_cpu_seconds();
        m.forward(b, cache.view, logits.data());
        const double s = seconds_since(t0);
        std::printf("| %d | %s | %.2f | %.1f | %.2f |\n", n, f == "expanded" ? "prompt (expanded)" : "generated (absorbed)",
                    s, n / s, process_cpu_seconds() - c0);
        std::fflush(stdout);
      }
  }
  if (!kv_rows.empty()) {
    std::printf("\n| context | batch | tokens cached (all sequences) | resident cache bytes (RSS growth) | "
                "resident bytes per token | arithmetic: per token + per sequence / tokens |\n|---|---|---|---|---|---|\n");
    for (const std::string& r : kv_rows) std::printf("%s\n", r.c_str());
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("\npeak RSS %.2f GB (weights are mapped; resident pages count)\n", double(ru.ru_maxrss) / 1e6);
  return 0;
}

}  // namespace
}  // namespace deepinfer

int main(int argc, char** argv) {
  deepinfer::Options o;
  CLI::App app{"Decode and prefill throughput of a checkpoint on the CPU backend"};
  app.add_option("--model", o.model_dir, "Hugging Face model folder")->required();
  app.add_option("--kv", o.kv, "KV cache dtype: bf16, fp8 or f32");
  app.add_option("--activations", o.activations, "Inputs of the bf16, fp8 and FP4 linear layers: f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}));
  app.add_option("--lm-head", o.lm_head, "The lm_head as stored, or quantized to int8 or fp8 at load (--lm-head-dtype)")
      ->check(CLI::IsMember({"stored", "int8", "fp8"}));
  app.add_flag("--no-weight-relay", o.no_weight_relay, "Every weight as stored (deepinfer's --no-weight-relay)");
  app.add_option("--batches", o.batches, "Concurrent sequences per decode step")->delimiter(',');
  app.add_option("--contexts", o.contexts, "Cached tokens per sequence for decode")->delimiter(',');
  app.add_option("--prompts", o.prompts, "Prompt lengths for prefill (0: none)")->delimiter(',');
  app.add_option("--steps", o.steps, "Timed decode steps per configuration");
  app.add_option("--verify-rows", o.verify_rows,
                 "Rows per sequence of speculative verification steps to time at the first context (e.g. 1,2,3,5)")
      ->delimiter(',');
  app.add_option("--max-kv-gib", o.max_kv_gib, "Skip decode configurations whose cache is larger");
  app.add_option("--prefill-formulations", o.prefill_formulations,
                 "Prefill the prompts as prompt rows (expanded MLA) and/or as generated rows (absorbed MLA)")
      ->delimiter(',')
      ->check(CLI::IsMember({"expanded", "absorbed"}));
  app.add_option("--prefill-repeats", o.prefill_repeats, "Prefill runs per prompt length and formulation, alternating");
  CLI11_PARSE(app, argc, argv);
  return deepinfer::run(o);
}
