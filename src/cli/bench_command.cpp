// `deepinfer bench`: benchmarks. Sub-subcommands:
//   serve        load an OpenAI-compatible server and report throughput and latency
//   stub-server  (hidden) a streaming server with known timings, to test `serve` against
// To add one (e.g. `bench offline`), write an add_bench_X(CLI::App& bench, Runner& run) like
// add_serve below and call it from add_bench_command.
#include "bench/load_driver.h"
#include "bench/run_report.h"
#include "bench/stub_server.h"
#include "cli/commands.h"

#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <thread>

namespace deepinfer::cli {
namespace {

using bench::Distribution;
using nlohmann::json;

constexpr uint64_t kRunSeedStream = 0x72756e;     // "run"
constexpr uint64_t kWarmupSeedStream = 0x7761726d;  // "warm"

struct ServeArgs {
  std::string base_url;
  std::string model;
  std::string api = "auto";
  std::string workload = "random";
  int64_t n_requests = 0;  // 0: 200, or the whole trace for replay
  int64_t requests_per_user = 0;
  std::string input_len = "1024", output_len = "128";
  int64_t prefix_groups = 4, prefix_len = 2048;
  int64_t system_len = 4096;
  std::string turns = "8", tool_result_len = "512", think_time = "1";
  std::string trace;
  bool trace_timing = false;
  double trace_speed = 1;
  int64_t trace_block_len = 512;
  std::vector<int64_t> concurrency;
  std::vector<double> request_rates;
  std::string arrival = "poisson";
  int64_t max_concurrency = 0;
  uint64_t seed = 0;
  bool ignore_eos = true;
  double temperature = 0;
  std::string extra_body;
  int gpus = 1;
  int client_threads = 1;
  double request_timeout_s = 600;
  int64_t warmup = 0;
  std::string metrics_path = "/metrics";
  bool no_metrics = false;
  double metrics_interval_s = 1;
  std::string output_json, save_records, dump_workload;
  bool quiet = false;
};

std::string now_iso8601() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// One point of the sweep: how the load is applied, and its name in reports.
struct RunPoint {
  bench::LoadOptions load;
  std::string label;
  json description;
};

std::vector<RunPoint> run_points(const ServeArgs& a, const bench::LoadOptions& base) {
  std::vector<RunPoint> points;
  if (a.trace_timing) {
    RunPoint p{base, "trace", {{"mode", "trace"}, {"trace_speed", a.trace_speed}, {"max_concurrency", a.max_concurrency}}};
    p.load.mode = bench::LoadOptions::Mode::kTrace;
    points.push_back(p);
  }
  for (double rate : a.request_rates) {
    char label[32];
    std::snprintf(label, sizeof label, "rate=%g", rate);
    RunPoint p{base, label, {{"mode", "rate"}, {"request_rate", rate}, {"arrival", a.arrival}, {"max_concurrency", a.max_concurrency}}};
    p.load.mode = bench::LoadOptions::Mode::kRate;
    p.load.rate = rate;
    points.push_back(p);
  }
  for (int64_t c : a.concurrency) {
    RunPoint p{base, "c=" + std::to_string(c), {{"mode", "concurrency"}, {"concurrency", c}}};
    p.load.mode = bench::LoadOptions::Mode::kConcurrency;
    p.load.concurrency = c;
    points.push_back(p);
  }
  return points;
}

Result<bench::WorkloadOptions> workload_options(const ServeArgs& a) {
  bench::WorkloadOptions w;
  w.kind = a.workload;
  w.seed = a.seed;
  w.n_conversations = a.n_requests > 0 ? a.n_requests : (a.workload == "replay" ? 0 : 200);
  DI_ASSIGN_OR_RETURN(w.input_len, Distribution::Parse(a.input_len));
  DI_ASSIGN_OR_RETURN(w.output_len, Distribution::Parse(a.output_len));
  DI_ASSIGN_OR_RETURN(w.turns, Distribution::Parse(a.turns));
  DI_ASSIGN_OR_RETURN(w.tool_result_len, Distribution::Parse(a.tool_result_len));
  DI_ASSIGN_OR_RETURN(w.think_time_s, Distribution::Parse(a.think_time));
  w.n_prefix_groups = a.prefix_groups;
  w.prefix_len = a.prefix_len;
  w.system_len = a.system_len;
  w.trace_path = a.trace;
  w.trace_speed = a.trace_speed;
  w.trace_block_len = a.trace_block_len;
  return w;
}

json config_json(const ServeArgs& a) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return {{"base_url", a.base_url},          {"model", a.model},
          {"api", a.api},                    {"workload", a.workload},
          {"num_requests", a.n_requests},    {"requests_per_user", a.requests_per_user},
          {"input_len", a.input_len},        {"output_len", a.output_len},
          {"prefix_groups", a.prefix_groups}, {"prefix_len", a.prefix_len},
          {"system_len", a.system_len},      {"turns", a.turns},
          {"tool_result_len", a.tool_result_len}, {"think_time_s", a.think_time},
          {"trace", a.trace},                {"seed", a.seed},
          {"ignore_eos", a.ignore_eos},      {"temperature", a.temperature},
          {"gpus", a.gpus},                  {"client_threads", a.client_threads},
          {"warmup", a.warmup},              {"client_host", host},
          {"client_cpus", std::thread::hardware_concurrency()}};
}

// Writes every turn of every conversation as replay JSON lines (the format --trace reads).
Status dump_workload(const bench::Workload& workload, const std::string& path) {
  std::ofstream out(path);
  if (!out) return Status::Error("cannot write " + path);
  for (int64_t i = 0; i < workload.n_conversations(); ++i) {
    auto conversation = workload.conversation(i);
    for (int64_t turn = 0; auto request = conversation->next_turn(); ++turn) {
      json messages = json::array();
      for (const auto& m : request->messages) messages.push_back({{"role", m.role}, {"content", m.content}});
      json line = {{"conversation", i},
                   {"turn", turn},
                   {"messages", std::move(messages)},
                   {"input_tokens", request->n_tokens_in},
                   {"output_tokens", request->n_tokens_out},
                   {"think_time_s", request->think_time_s}};
      out << line.dump() << '\n';
    }
  }
  return out ? Status::Ok() : Status::Error("cannot write " + path);
}

json record_json(const bench::RequestRecord& r, const std::string& label) {
  return {{"run", label},
          {"conversation", r.conversation},
          {"turn", r.turn},
          {"t_sent_s", r.t_sent_s},
          {"e2e_s", r.e2e_s},
          {"chunk_times_s", r.chunk_times_s},
          {"tokens_in", r.n_tokens_in},
          {"tokens_out", r.n_tokens_out},
          {"usage_reported", r.usage_reported},
          {"error", r.error},
          {"error_detail", r.error_detail}};
}

int run_serve(const ServeArgs& a) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "error: %s\n", s.message().c_str());
    return 1;
  };
  auto endpoint = bench::parse_base_url(a.base_url);
  if (!endpoint.ok()) return fail(endpoint.status());
  auto options = workload_options(a);
  if (!options.ok()) return fail(options.status());

  bench::ApiOptions api;
  api.model = a.model;
  api.ignore_eos = a.ignore_eos;
  api.temperature = a.temperature;
  if (!a.extra_body.empty()) {
    api.extra_body = json::parse(a.extra_body, nullptr, false);
    if (api.extra_body.is_discarded() || !api.extra_body.is_object()) {
      return fail(Status::Error("--extra-body is not a JSON object"));
    }
  }

  bench::LoadOptions base;
  base.max_concurrency = a.max_concurrency;
  base.poisson = a.arrival == "poisson";
  base.n_threads = a.client_threads;
  base.request_timeout_s = a.request_timeout_s;
  base.scrape_metrics = !a.no_metrics;
  base.metrics_path = a.metrics_path;
  base.metrics_interval_s = a.metrics_interval_s;
  base.show_progress = !a.quiet;

  ServeArgs args = a;
  if (args.concurrency.empty() && args.request_rates.empty() && !args.trace_timing) args.concurrency = {8};
  const std::vector<RunPoint> points = run_points(args, base);

  // Each run sends its own prompts (seed derived from --seed and the run's position), so the
  // server's prefix cache does not carry over from one run of a sweep to the next.
  auto run_seed = [&](size_t point) { return bench::Rng::Derive(a.seed, kRunSeedStream, point).next(); };
  if (!a.dump_workload.empty()) {
    bench::WorkloadOptions w = *options;
    w.seed = run_seed(0);
    auto workload = bench::make_workload(w);
    if (!workload.ok()) return fail(workload.status());
    Status s = dump_workload(**workload, a.dump_workload);
    return s.ok() ? 0 : fail(s);
  }

  std::ofstream records_out;
  if (!a.save_records.empty()) {
    records_out.open(a.save_records);
    if (!records_out) return fail(Status::Error("cannot write " + a.save_records));
  }
  json runs = json::array();
  std::vector<bench::RunReport> reports;
  // With --warmup, step 0 warms up at the first point's load; the points follow.
  const size_t first_point_step = a.warmup > 0 ? 1 : 0;
  for (size_t step = 0; step < points.size() + first_point_step; ++step) {
    const bool warmup = step < first_point_step;
    const size_t point_index = warmup ? 0 : step - first_point_step;
    const RunPoint& point = points[point_index];
    bench::WorkloadOptions w = *options;
    w.seed = warmup ? bench::Rng::Derive(a.seed, kWarmupSeedStream).next() : run_seed(point_index);
    if (warmup) {
      w.n_conversations = a.warmup;
    } else if (a.requests_per_user > 0 && point.load.mode == bench::LoadOptions::Mode::kConcurrency) {
      w.n_conversations = a.requests_per_user * point.load.concurrency;
    }
    auto workload = bench::make_workload(w);
    if (!workload.ok()) return fail(workload.status());
    api.chat = a.api == "chat" || (a.api == "auto" && (*workload)->multi_turn());
    bench::LoadOptions load = point.load;
    load.seed = w.seed;
    load.label = warmup ? "warmup" : point.label;
    auto result = bench::run_load(**workload, api, *endpoint, load);
    if (!result.ok()) return fail(result.status());
    if (warmup) continue;
    json description = point.description;
    description["api"] = api.chat ? "chat" : "completions";
    bench::RunReport report = bench::make_report(*result, point.label, description, a.gpus);
    std::cout << bench::format_report(report) << std::flush;
    for (const auto& r : result->records) {
      if (!r.ok() && !a.quiet) std::fprintf(stderr, "[%s] request failed: %s: %s\n", point.label.c_str(), r.error.c_str(), r.error_detail.c_str());
      if (records_out.is_open()) records_out << record_json(r, point.label).dump() << '\n';
    }
    runs.push_back(bench::to_json(report));
    reports.push_back(std::move(report));
  }
  if (reports.size() > 1) std::cout << '\n' << bench::format_sweep(reports) << std::flush;
  if (!a.output_json.empty()) {
    json doc = {{"tool", "deepinfer bench serve"}, {"date", now_iso8601()}, {"config", config_json(a)}, {"runs", runs}};
    std::ofstream out(a.output_json);
    out << doc.dump(2) << '\n';
    if (!out) return fail(Status::Error("cannot write " + a.output_json));
  }
  long failed = 0;
  for (const auto& r : reports) failed += r.n_failed;
  return failed > 0 ? 3 : 0;
}

void add_serve(CLI::App& bench, Runner& run) {
  auto a = std::make_shared<ServeArgs>();
  CLI::App* cmd = bench.add_subcommand("serve", "Load an OpenAI-compatible server (streaming) and report throughput, "
                                                "TTFT/TPOT/ITL/E2E percentiles and per-user speed");
  cmd->add_option("--base-url", a->base_url, "Server root, http://HOST:PORT (requests go to /v1/...)")->required();
  cmd->add_option("--model", a->model, "Model name sent in requests")->required();
  cmd->add_option("--api", a->api, "completions | chat | auto (chat for agentic, else completions)")
      ->check(CLI::IsMember({"auto", "chat", "completions"}))->capture_default_str();
  cmd->add_option("--workload", a->workload, "random | shared-prefix | agentic | replay")
      ->check(CLI::IsMember({"random", "shared-prefix", "agentic", "replay"}))->capture_default_str();
  cmd->add_option("--num-requests", a->n_requests,
                  "Requests per run, sessions for agentic (default 200); replay: lines (default all)");
  cmd->add_option("--requests-per-user", a->requests_per_user,
                  "With --concurrency: requests per run = this x concurrency (overrides --num-requests)");
  const char* dist = " (N | uniform:LO:HI | normal:MEAN:STD | exponential:MEAN)";
  cmd->add_option("--input-len", a->input_len, std::string("Prompt tokens; shared-prefix: suffix; agentic: task message") + dist)
      ->capture_default_str();
  cmd->add_option("--output-len", a->output_len, std::string("max_tokens per request or turn") + dist)->capture_default_str();
  cmd->add_option("--prefix-groups", a->prefix_groups, "shared-prefix: number of prefixes")->capture_default_str();
  cmd->add_option("--prefix-len", a->prefix_len, "shared-prefix: tokens per prefix")->capture_default_str();
  cmd->add_option("--system-len", a->system_len, "agentic: tokens of the shared system prompt with tools")->capture_default_str();
  cmd->add_option("--turns", a->turns, std::string("agentic: turns per session") + dist)->capture_default_str();
  cmd->add_option("--tool-result-len", a->tool_result_len, std::string("agentic: tokens of each tool result") + dist)
      ->capture_default_str();
  cmd->add_option("--think-time", a->think_time, std::string("agentic: seconds between an answer and the next turn") + dist)
      ->capture_default_str();
  cmd->add_option("--trace", a->trace, "replay: JSON-lines trace file");
  cmd->add_flag("--trace-timing", a->trace_timing, "replay: send at the trace's timestamps (a run of its own)");
  cmd->add_option("--trace-speed", a->trace_speed, "replay: time compression of --trace-timing")->capture_default_str();
  cmd->add_option("--trace-block-len", a->trace_block_len, "replay: tokens per hash_ids block")->capture_default_str();
  cmd->add_option("--concurrency", a->concurrency, "Conversations in progress; a list sweeps, e.g. 8,16,32,64,128,256")
      ->delimiter(',');
  cmd->add_option("--request-rate", a->request_rates, "Conversations started per second; a list sweeps")->delimiter(',');
  cmd->add_option("--arrival", a->arrival, "With --request-rate: poisson | constant")
      ->check(CLI::IsMember({"poisson", "constant"}))->capture_default_str();
  cmd->add_option("--max-concurrency", a->max_concurrency, "With --request-rate/--trace-timing: requests in flight at most (0: no cap)")
      ->capture_default_str();
  cmd->add_option("--seed", a->seed, "Seed of prompts, lengths and arrivals")->capture_default_str();
  cmd->add_flag("--ignore-eos,!--no-ignore-eos", a->ignore_eos, "Send ignore_eos so outputs have exactly max_tokens")
      ->capture_default_str();
  cmd->add_option("--temperature", a->temperature)->capture_default_str();
  cmd->add_option("--extra-body", a->extra_body, "JSON object merged into every request body");
  cmd->add_option("--gpus", a->gpus, "Divides throughput for the per-GPU figure")->capture_default_str();
  cmd->add_option("--client-threads", a->client_threads, "Client threads (more for thousands of fast streams)")
      ->capture_default_str();
  cmd->add_option("--request-timeout", a->request_timeout_s, "Seconds before a request counts as failed (timeout)")
      ->capture_default_str();
  cmd->add_option("--warmup", a->warmup, "Requests sent (and not measured) before the first run")->capture_default_str();
  cmd->add_option("--metrics-path", a->metrics_path, "Prometheus page scraped for prefix-cache and KV usage")
      ->capture_default_str();
  cmd->add_flag("--no-metrics", a->no_metrics, "Do not scrape server metrics");
  cmd->add_option("--metrics-interval", a->metrics_interval_s, "Seconds between metric scrapes")->capture_default_str();
  cmd->add_option("--output-json", a->output_json, "Write the report as JSON (bench/serving/plot.py draws it)");
  cmd->add_option("--save-records", a->save_records, "Write every request's timings as JSON lines");
  cmd->add_option("--dump-workload", a->dump_workload, "Write the first run's requests as replay JSON lines and exit");
  cmd->add_flag("--quiet", a->quiet, "No progress line");
  cmd->callback([&run, a] { run = [a] { return run_serve(*a); }; });
}

void add_stub_server(CLI::App& bench, Runner& run) {
  auto o = std::make_shared<bench::StubOptions>();
  CLI::App* cmd = bench.add_subcommand("stub-server", "OpenAI-compatible streaming server with known timings (for tests)");
  cmd->group("");  // hidden: a test tool
  cmd->add_option("--host", o->host)->capture_default_str();
  cmd->add_option("--port", o->port, "0: any free port (printed)")->capture_default_str();
  cmd->add_option("--model", o->model)->capture_default_str();
  cmd->add_option("--ttft-ms", o->ttft_ms)->capture_default_str();
  cmd->add_option("--prefill-ms-per-token", o->prefill_ms_per_token, "Added to TTFT per uncached prompt token")
      ->capture_default_str();
  cmd->add_option("--itl-ms", o->itl_ms)->capture_default_str();
  cmd->add_option("--stall-every", o->stall_every, "Every Nth inter-token gap is --stall-ms longer")->capture_default_str();
  cmd->add_option("--stall-ms", o->stall_ms)->capture_default_str();
  cmd->add_option("--default-max-tokens", o->default_max_tokens)->capture_default_str();
  cmd->add_option("--fail-every", o->fail_every, "Every Nth generation request gets HTTP 500")->capture_default_str();
  cmd->add_option("--kv-slots", o->kv_slots, "KV usage gauge = generations in flight / this")->capture_default_str();
  cmd->add_option("--block-tokens", o->block_tokens, "Prefix-cache block size")->capture_default_str();
  cmd->add_option("--threads", o->n_threads)->capture_default_str();
  cmd->add_option("--lifetime", o->lifetime_s, "Seconds until it exits by itself")->capture_default_str();
  cmd->callback([&run, o] {
    run = [o] {
      Status s = bench::run_stub_server(*o);
      if (s.ok()) return 0;
      std::fprintf(stderr, "error: %s\n", s.message().c_str());
      return 1;
    };
  });
}

void add_bench_command(CLI::App& app, Runner& run) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  add_serve(*bench, run);
  add_stub_server(*bench, run);
}

const bool kRegistered = register_command(&add_bench_command);

}  // namespace
}  // namespace deepinfer::cli
