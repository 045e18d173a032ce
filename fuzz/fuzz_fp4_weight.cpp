// libFuzzer target for binding FP4 weights from a checkpoint file: the input is written as a
// one-file checkpoint; every I8 tensor `P.weight` is bound with bind_fp4_weight at the widths its
// shape implies and at widths taken from the input, so shapes, scale tensors (missing, of another
// dtype or shape, holding 0xff) and input widths that are not multiples of 32 all meet the checks.
// A bound weight must cover exactly its tensor's bytes and its scales must hold no NaN byte; then
// sampled rows are dequantized (the first and last element of each, and every scale), which ASan
// checks against the mapping.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "core/dtype.h"
#include "model/fp4_weight.h"
#include "model/safetensors.h"

namespace {

std::string checkpoint_dir() {
  static const std::string dir = [] {
    char tmpl[] = "/tmp/fuzz_fp4_XXXXXX";
    const char* d = mkdtemp(tmpl);
    if (!d) std::abort();
    return std::string(d);
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer;
  const std::string dir = checkpoint_dir();
  {
    FILE* f = std::fopen((dir + "/model.safetensors").c_str(), "wb");
    if (!f) std::abort();
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  auto ckpt = Checkpoint::Open(dir);
  if (!ckpt.ok()) return 0;
  for (const auto& [name, t] : ckpt->tensors()) {
    if (t.dtype != DType::I8 || t.shape.size() != 2 || !name.ends_with(".weight")) continue;
    const std::string prefix = name.substr(0, name.size() - 7);
    const int64_t extra = size ? int64_t(data[size - 1]) : 0;
    for (const auto& [n_out, n_in] : {std::pair{t.shape[0], 2 * t.shape[1]}, std::pair{t.shape[0] + extra % 3, extra * 8}}) {
      Result<LinearWeight> w = bind_fp4_weight(*ckpt, dir, prefix, t, n_out, n_in);
      if (!w.ok()) continue;
      const TensorView* s = ckpt->find(prefix + ".scale");
      if (!s || w->data != t.data || t.n_bytes != weight_data_bytes(*w) ||
          s->n_bytes != size_t(n_out) * size_t(n_in / kFp4ScaleBlock))
        std::abort();
      for (size_t i = 0; i < s->n_bytes; ++i)
        if (s->data[i] == 0xff) std::abort();
      const auto* packed = static_cast<const uint8_t*>(w->data);
      for (int64_t r = 0; n_in > 0 && r < n_out; r += std::max<int64_t>(1, n_out / 4)) {
        const uint8_t* row = packed + r * (n_in / 2);
        const uint8_t* scales = w->scale_e8m0 + r * (n_in / kFp4ScaleBlock);
        for (int64_t j : {int64_t(0), n_in - 1}) {
          const float v = fp4_e2m1_at(row, j) * std::ldexp(1.0f, int(scales[j / kFp4ScaleBlock]) - 127);
          if (std::isnan(v)) std::abort();
        }
      }
    }
  }
  return 0;
}
