// Safetensors files and checkpoints (one file, or shards listed in model.safetensors.index.json).
// Files are memory-mapped; tensors are views into the mapping. The header is untrusted: every
// tensor's dtype, shape and byte range is validated (inside the data section, dtype x shape =
// byte length, no overlaps, unique names) before any view is handed out.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "core/status.h"

namespace deepinfer {

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // inside the file mapping; unaligned in general
  size_t n_bytes = 0;
  const std::string* file = nullptr;  // path of the file that holds it

  int64_t numel() const;
  std::string shape_str() const;  // "[16, 256]"
};

// Parses a safetensors image held in memory: `source` names it in errors. Views point into `data`.
Result<std::map<std::string, TensorView>> parse_safetensors(const uint8_t* data, size_t size,
                                                            const std::string& source);

class Checkpoint {
 public:
  // DIR/model.safetensors.index.json if present (every shard it names), else every
  // DIR/*.safetensors. A tensor name in two files is an error.
  static Result<Checkpoint> Open(const std::string& model_dir);

  const TensorView* find(const std::string& name) const;  // nullptr when absent
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  size_t total_bytes() const;

 private:
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<std::unique_ptr<std::string>> paths_;
  std::map<std::string, TensorView> tensors_;
};

}  // namespace deepinfer
