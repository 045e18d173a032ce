#include "model/deepseek_v4/block_scaled_weights.h"

#include <cstring>

#include "core/check.h"
#include "core/dtype.h"

namespace deepinfer {

void ue8m0_to_f32(const uint8_t* scales, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = deepinfer::ue8m0_to_f32(scales[i]);
}

LinearWeight BlockScaledBinder::linear(const std::string& prefix, int64_t n_out, int64_t n_in, bool fp4_ok) {
  LinearWeight lw;
  const std::string name = prefix + ".weight";
  const TensorView* t = find(name);
  if (!t) return lw;
  lw.n_out = n_out;
  lw.n_in = n_in;
  if (t->dtype == DType::I8 && fp4_ok) {
    Result<LinearWeight> fp4 = bind_fp4_weight(ckpt_, dir_, prefix, *t, n_out, n_in);
    if (!fp4.ok()) {
      fail(fp4.status().message());
      return lw;
    }
    n_params_ += size_t(n_out * n_in);
    n_bytes_ += fp4_weight_bytes(*fp4);
    return *fp4;
  }
  if (t->dtype != DType::BF16 && t->dtype != DType::F16 && t->dtype != DType::F32 && t->dtype != DType::F8_E4M3) {
    fail(*t->file + ": tensor '" + name + "' must be BF16, F16, F32 or F8_E4M3" + (fp4_ok ? " or I8 (FP4)" : "") +
         ", is " + std::string(dtype_name(t->dtype)));
    return lw;
  }
  if (!shape_is(*t, {n_out, n_in})) return lw;
  lw.dtype = t->dtype;
  lw.data = aligned(*t);
  if (t->dtype == DType::F8_E4M3) {
    if (!quant_.enabled) {
      fail(*t->file + ": tensor '" + name + "' is F8_E4M3 but config.json has no fp8 quantization_config");
      return lw;
    }
    lw.block_rows = quant_.block_rows;
    lw.block_cols = quant_.block_cols;
    const int64_t rows = (n_out + lw.block_rows - 1) / lw.block_rows, cols = (n_in + lw.block_cols - 1) / lw.block_cols;
    const TensorView* s = scale(prefix, {rows, cols});
    if (!s) return lw;
    auto& bytes = owned_.emplace_back(size_t(rows * cols) * 4);
    ue8m0_to_f32(s->data, rows * cols, reinterpret_cast<float*>(bytes.data()));
    lw.scale_inv = reinterpret_cast<const float*>(bytes.data());
    count(*s, 0);
  }
  count(*t, 1);
  return lw;
}

std::vector<float> BlockScaledBinder::floats(const std::string& name, const std::vector<int64_t>& shape) {
  const TensorView* t = find(name);
  if (!t || !shape_is(*t, shape)) return {};
  if (t->dtype != DType::F32 && t->dtype != DType::BF16 && t->dtype != DType::F16) {
    fail(*t->file + ": tensor '" + name + "' must be F32, BF16 or F16, is " + std::string(dtype_name(t->dtype)));
    return {};
  }
  std::vector<float> out(size_t(t->numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    if (t->dtype == DType::F32) std::memcpy(&out[i], t->data + i * 4, 4);
    else {
      uint16_t bits;
      std::memcpy(&bits, t->data + i * 2, 2);
      out[i] = t->dtype == DType::BF16 ? bf16_to_f32(bits) : f16_to_f32(bits);
    }
  }
  count(*t, 1);
  return out;
}

LinearWeight BlockScaledBinder::f32_linear(const std::string& name, int64_t n_out, int64_t n_in) {
  LinearWeight lw;
  const TensorView* t = find(name);
  if (!t || !shape_is(*t, {n_out, n_in})) return lw;
  if (t->dtype != DType::F32) {
    fail(*t->file + ": tensor '" + name + "' must be F32, is " + std::string(dtype_name(t->dtype)));
    return lw;
  }
  lw.dtype = DType::F32;
  lw.data = aligned(*t);
  lw.n_out = n_out;
  lw.n_in = n_in;
  count(*t, 1);
  return lw;
}

const TensorView* BlockScaledBinder::find(const std::string& name) {
  if (!status_.ok()) return nullptr;
  const TensorView* t = ckpt_.find(name);
  if (!t) fail(dir_ + ": tensor '" + name + "' is missing from the checkpoint");
  return t;
}

bool BlockScaledBinder::shape_is(const TensorView& t, const std::vector<int64_t>& shape) {
  if (t.shape == shape) return true;
  TensorView want;
  want.shape = shape;
  fail(*t.file + ": tensor '" + t.name + "' (" + std::string(dtype_name(t.dtype)) + ") has shape " + t.shape_str() +
       ", expected " + want.shape_str() + " from config.json");
  return false;
}

const TensorView* BlockScaledBinder::scale(const std::string& prefix, const std::vector<int64_t>& shape) {
  const TensorView* s = find(prefix + ".scale");
  if (!s || !shape_is(*s, shape)) return nullptr;
  if (s->dtype != DType::F8_E8M0) {
    fail(*s->file + ": tensor '" + s->name + "' must be F8_E8M0, is " + std::string(dtype_name(s->dtype)));
    return nullptr;
  }
  return s;
}

const void* BlockScaledBinder::aligned(const TensorView& t) {
  if (reinterpret_cast<uintptr_t>(t.data) % dtype_size(t.dtype) == 0) return t.data;
  auto& copy = owned_.emplace_back(t.data, t.data + t.n_bytes);
  return copy.data();
}

void BlockScaledBinder::count(const TensorView& t, size_t params_per_element) {
  n_params_ += size_t(t.numel()) * params_per_element;
  n_bytes_ += t.n_bytes;
}

}  // namespace deepinfer
