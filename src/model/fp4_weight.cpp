#include "model/fp4_weight.h"

#include <cstring>

namespace deepinfer {
namespace {

std::string shape_str(const std::vector<int64_t>& shape) {
  TensorView v;
  v.shape = shape;
  return v.shape_str();
}

}  // namespace

Result<LinearWeight> bind_fp4_weight(const Checkpoint& ckpt, const std::string& dir, const std::string& prefix,
                                     const TensorView& packed, int64_t n_out, int64_t n_in) {
  const std::string name = prefix + ".weight", scale_name = prefix + ".scale";
  if (n_in % kFp4ScaleBlock != 0)
    return Status::Error(*packed.file + ": tensor '" + name + "' is FP4 but its input width " + std::to_string(n_in) +
                         " is not a multiple of 32");
  const std::vector<int64_t> want = {n_out, n_in / 2}, want_scale = {n_out, n_in / kFp4ScaleBlock};
  if (packed.shape != want)
    return Status::Error(*packed.file + ": tensor '" + name + "' (I8, FP4 packed two per byte) has shape " +
                         packed.shape_str() + ", expected " + shape_str(want) + " from config.json");
  const TensorView* s = ckpt.find(scale_name);
  if (!s)
    return Status::Error(dir + ": tensor '" + scale_name + "' is missing from the checkpoint (the F8_E8M0 scales of the FP4 weight '" +
                         name + "' in " + *packed.file + ")");
  if (s->dtype != DType::F8_E8M0)
    return Status::Error(*s->file + ": tensor '" + scale_name + "' must be F8_E8M0, is " + std::string(dtype_name(s->dtype)));
  if (s->shape != want_scale)
    return Status::Error(*s->file + ": tensor '" + scale_name + "' (F8_E8M0) has shape " + s->shape_str() + ", expected " +
                         shape_str(want_scale) + " from config.json");
  if (const void* nan = std::memchr(s->data, 0xff, s->n_bytes)) {
    const int64_t at = static_cast<const uint8_t*>(nan) - s->data;
    return Status::Error(*s->file + ": tensor '" + scale_name + "' holds the NaN scale 0xff at [" +
                         std::to_string(at / s->shape[1]) + ", " + std::to_string(at % s->shape[1]) + "]");
  }
  LinearWeight lw;
  lw.dtype = DType::F4_E2M1;
  lw.data = packed.data;
  lw.n_out = n_out;
  lw.n_in = n_in;
  lw.scale_e8m0 = s->data;
  lw.block_rows = 1;
  lw.block_cols = kFp4ScaleBlock;
  return lw;
}

}  // namespace deepinfer
