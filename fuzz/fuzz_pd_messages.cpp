// The prefill/decode control-message decoders on arbitrary bytes: each either fails with a
// Status or yields a message that re-encodes to the same bytes; the semantic checks then run on
// whatever decoded, against a fixed local layout.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "dist/pd/pd_messages.h"

using namespace deepinfer::pd;

namespace {

void same_bytes(const std::string& re, std::string_view in) {
  if (re != in) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const KvLayout local{"fuzz", 2, 4, {{2, 192, 0, 64}, {1, 96, 6, 16}}};
  if (auto r = decode_prefill_request(in); r.ok()) {
    same_bytes(encode(*r), in);
    (void)check_request(*r, local);
    PrefillGrant g;
    g.transfer_id = r->transfer_id;
    (void)check_grant(g, *r, local);
  }
  if (auto g = decode_prefill_grant(in); g.ok()) {
    same_bytes(encode(*g), in);
    PrefillRequest req;
    req.transfer_id = g->transfer_id;
    req.layout = local;
    for (size_t i = 0; i < g->blocks.size(); ++i) req.wanted.push_back({uint32_t(i % 3), uint32_t(i)});
    (void)check_grant(*g, req, local);
  }
  if (auto m = decode_release(in); m.ok()) same_bytes(encode(*m), in);
  if (auto m = decode_release_ack(in); m.ok()) same_bytes(encode(*m), in);
  return 0;
}
