// libFuzzer target for the benchmark client's reading of a server's /metrics page (network
// input): the input, split at its first NUL into two scrapes, is parsed as Prometheus text and
// turned into a run report (speculative figures included), as JSON and text. Nothing may crash;
// per-position counters stay within the 4-digit positions the parser accepts.
//   build-fuzz/fuzz/fuzz_server_metrics fuzz/corpus/server_metrics
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "bench/run_report.h"
#include "bench/server_metrics.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer::bench;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const ServerMetrics first = parse_server_metrics(input.substr(0, nul));
  const ServerMetrics last = parse_server_metrics(nul == std::string_view::npos ? input : input.substr(nul + 1));
  for (const ServerMetrics* m : {&first, &last})
    if (m->spec_draft_tokens_at.size() > 10000 || m->spec_accepted_tokens_at.size() > 10000) std::abort();
  LoadResult result;
  result.duration_s = 1;
  result.metrics = {{0, first}, {0.5, last}, {2, last}};
  const RunReport report = make_report(result, "fuzz", {}, 1);
  (void)to_json(report).dump();
  (void)format_report(report);
  return 0;
}
