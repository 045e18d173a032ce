// libFuzzer target for what `deepinfer router` reads from the network: client request bodies
// (parsed with the nesting limit, then hashed for prefill affinity), a worker's /metrics text
// (its load) and a decode worker's X-DeepInfer-Retry value. The first byte picks the reader.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "dist/router/affinity_key.h"
#include "dist/router/retry_rule.h"
#include "dist/router/worker_load.h"
#include "server/request_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0: {
      nlohmann::ordered_json body;
      if (deepinfer::parse_untrusted_json(text, body).empty()) {
        (void)deepinfer::router::affinity_key(body, data[0]);
        (void)deepinfer::string_member(body, "url");
      }
      break;
    }
    case 1: {
      auto load = deepinfer::router::parse_worker_load(text);
      if (load.ok() && (load->n_running < 0 || load->n_waiting < 0 || load->kv_usage < 0)) __builtin_trap();
      break;
    }
    case 2:
      (void)deepinfer::router::upstream_action(503, text, true, data[0] & 4);
      break;
  }
  return 0;
}
