// libFuzzer target for the safetensors header parser: any byte string must give either a
// validated tensor map whose views lie inside the input, or an error, never a crash.
#include <cstdint>
#include <cstdlib>

#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto r = deepinfer::parse_safetensors(data, size, "fuzz.safetensors");
  if (r.ok()) {
    for (const auto& [name, t] : r.value()) {
      if (t.data < data || t.data + t.n_bytes > data + size) std::abort();
      volatile uint8_t sink = 0;
      if (t.n_bytes) sink = t.data[0] ^ t.data[t.n_bytes - 1];
      (void)sink;
    }
  }
  return 0;
}
