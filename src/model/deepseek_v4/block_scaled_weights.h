// Block-scaled weight formats of DeepSeek-V4 checkpoints (reused by V4.1):
//   FP8: e4m3 [out, in] with UE8M0 scales [ceil(out / R), ceil(in / C)] (quantization_config's
//        weight_block_size [R, C]: 128 x 128 in V4, 32 x 32 in V4.1):
//        W[i, j] = e4m3(w[i, j]) * 2^(s[i / R, j / C] - 127)
//   FP4: e2m1 nibbles packed two per byte [out, in / 2] (element j in the low nibble when j is
//        even) with UE8M0 scales [out, in / 32]: W[i, j] = E2M1[nibble] * 2^(s[i, j / 32] - 127)
// BlockScaledBinder binds such tensors of a checkpoint by name, checking shapes and dtypes;
// errors name the file and the tensor.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "core/status.h"
#include "kernels/ops.h"
#include "model/deepseek_v4/config.h"
#include "model/fp4_weight.h"
#include "model/safetensors.h"

namespace deepinfer {

// UE8M0 bytes to f32 powers of two (the kernels' F8_E4M3 scale_inv).
void ue8m0_to_f32(const uint8_t* scales, int64_t n, float* out);

// Binds tensors of `ckpt`, remembering the first error. Realigned copies and f32 scales go to
// `owned`; FP4 weights stay packed in the mapping (LinearWeight F4_E2M1 with scale_e8m0);
// parameters and stored bytes are added to n_params / n_bytes.
class BlockScaledBinder {
 public:
  BlockScaledBinder(const Checkpoint& ckpt, const std::string& dir, const Fp8Quantization& quant,
                    std::deque<std::vector<uint8_t>>& owned, size_t& n_params, size_t& n_bytes)
      : ckpt_(ckpt), dir_(dir), quant_(quant), owned_(owned), n_params_(n_params), n_bytes_(n_bytes) {}

  const Status& status() const { return status_; }
  void fail(const std::string& message) {
    if (status_.ok()) status_ = Status::Error(message);
  }

  // `prefix`.weight [n_out, n_in]: BF16/F16/F32, or F8_E4M3 with `prefix`.scale; with `fp4_ok`
  // (routed experts) also I8 packed FP4 with `prefix`.scale per 32 inputs (bind_fp4_weight).
  LinearWeight linear(const std::string& prefix, int64_t n_out, int64_t n_in, bool fp4_ok = false);
  // An F32/BF16/F16 tensor of `shape`, as f32 (norms, biases, hyper-connection parameters).
  std::vector<float> floats(const std::string& name, const std::vector<int64_t>& shape);
  // An F32 matrix used as a linear weight (hyper-connection fn), kept in the mapping.
  LinearWeight f32_linear(const std::string& name, int64_t n_out, int64_t n_in);

  // The tensor, or nullptr with an error naming it.
  const TensorView* find(const std::string& name);
  bool shape_is(const TensorView& t, const std::vector<int64_t>& shape);
  // `prefix`.scale of `shape` in F8_E8M0.
  const TensorView* scale(const std::string& prefix, const std::vector<int64_t>& shape);
  // t's data, or an aligned copy when the mapping is misaligned for its dtype.
  const void* aligned(const TensorView& t);
  void count(const TensorView& t, size_t params_per_element);
  std::vector<uint8_t>& own(size_t n_bytes) { return owned_.emplace_back(n_bytes); }

 protected:
  Status status_;

 private:
  const Checkpoint& ckpt_;
  const std::string& dir_;
  const Fp8Quantization& quant_;
  std::deque<std::vector<uint8_t>>& owned_;
  size_t& n_params_;
  size_t& n_bytes_;
};

}  // namespace deepinfer
