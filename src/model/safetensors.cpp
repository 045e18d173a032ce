#include "model/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

namespace deepinfer {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // as the reference implementation

// Parses JSON, failing on duplicate keys at the top level (nlohmann would keep the last).
Result<json> parse_header_json(const char* begin, size_t n, const std::string& source) {
  std::set<std::string> keys;
  std::string duplicate;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && duplicate.empty()) {
      const std::string& k = parsed.get_ref<const std::string&>();
      if (!keys.insert(k).second) duplicate = k;
    }
    return true;
  };
  json j = json::parse(begin, begin + n, cb, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::Error(source + ": header is not valid JSON");
  if (!duplicate.empty()) return Status::Error(source + ": tensor '" + duplicate + "' appears twice in the header");
  if (!j.is_object()) return Status::Error(source + ": header is not a JSON object");
  return j;
}

// One header entry; `base` is the start of the data section of `data_size` bytes.
Result<TensorView> parse_entry(const std::string& name, const json& e, const uint8_t* base, size_t data_size,
                               const std::string& source) {
  const std::string where = source + ": tensor '" + name + "'";
  if (!e.is_object()) return Status::Error(where + ": entry is not an object");
  auto dt = e.find("dtype");
  auto sh = e.find("shape");
  auto off = e.find("data_offsets");
  if (dt == e.end() || !dt->is_string()) return Status::Error(where + ": missing dtype");
  if (sh == e.end() || !sh->is_array()) return Status::Error(where + ": missing shape");
  if (off == e.end() || !off->is_array() || off->size() != 2) return Status::Error(where + ": data_offsets must be [begin, end]");
  TensorView t;
  t.name = name;
  auto dtype = dtype_from_name(dt->get_ref<const std::string&>());
  if (!dtype) return Status::Error(where + ": dtype " + dt->get<std::string>() + " is not supported (F32, F16, BF16, F8_E4M3, F8_E8M0, I8, I64)");
  t.dtype = *dtype;
  uint64_t numel = 1;
  for (const auto& d : *sh) {
    if (!d.is_number_unsigned()) return Status::Error(where + ": shape must hold non-negative integers");
    const uint64_t v = d.get<uint64_t>();
    if (v != 0 && numel > (uint64_t(1) << 62) / v) return Status::Error(where + ": shape is too large");
    numel *= v;
    t.shape.push_back(int64_t(v));
  }
  for (const auto& o : *off)
    if (!o.is_number_unsigned()) return Status::Error(where + ": data_offsets must be non-negative integers");
  const uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
  if (begin > end || end > data_size)
    return Status::Error(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                         "] fall outside the data section of " + std::to_string(data_size) + " bytes (truncated file?)");
  const uint64_t want = numel * dtype_size(t.dtype);
  if (end - begin != want)
    return Status::Error(where + ": " + std::to_string(end - begin) + " bytes for " + std::string(dtype_name(t.dtype)) +
                         " " + t.shape_str() + ", which needs " + std::to_string(want));
  t.n_bytes = size_t(want);
  t.data = base + begin;
  return t;
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorView::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Result<std::map<std::string, TensorView>> parse_safetensors(const uint8_t* data, size_t size,
                                                            const std::string& source) {
  if (size < 8) return Status::Error(source + ": too short for a safetensors file (" + std::to_string(size) + " bytes)");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
  if (header_len > kMaxHeaderBytes) return Status::Error(source + ": header length " + std::to_string(header_len) + " is too large");
  if (header_len > size - 8)
    return Status::Error(source + ": header length " + std::to_string(header_len) + " exceeds the file size (truncated file?)");
  DI_ASSIGN_OR_RETURN(json header, parse_header_json(reinterpret_cast<const char*>(data + 8), header_len, source));

  const uint8_t* base = data + 8 + header_len;
  const size_t data_size = size - 8 - header_len;
  std::map<std::string, TensorView> out;
  std::vector<std::pair<size_t, size_t>> ranges;  // [begin, end) within the data section
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return Status::Error(source + ": __metadata__ must be an object");
      continue;
    }
    DI_ASSIGN_OR_RETURN(TensorView t, parse_entry(it.key(), *it, base, data_size, source));
    const size_t begin = size_t(t.data - base);
    if (t.n_bytes > 0) ranges.emplace_back(begin, begin + t.n_bytes);
    out.emplace(it.key(), std::move(t));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) {
      for (const auto& [name, t] : out)
        if (size_t(t.data - base) == ranges[i].first)
          return Status::Error(source + ": tensor '" + name + "' overlaps another tensor's bytes");
      return Status::Error(source + ": two tensors overlap");
    }
  return out;
}

Result<Checkpoint> Checkpoint::Open(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  const fs::path index_path = fs::path(model_dir) / "model.safetensors.index.json";
  std::map<std::string, std::string> weight_map;  // from the index, checked after loading
  if (fs::exists(index_path)) {
    DI_ASSIGN_OR_RETURN(std::string text, read_text_file(index_path.string()));
    json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return Status::Error(index_path.string() + ": not a valid JSON object");
    auto wm = j.find("weight_map");
    if (wm == j.end() || !wm->is_object()) return Status::Error(index_path.string() + ": missing 'weight_map' object");
    std::set<std::string> unique;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it->is_string()) return Status::Error(index_path.string() + ": weight_map['" + it.key() + "'] must be a file name");
      const std::string& f = it->get_ref<const std::string&>();
      if (f.find('/') != std::string::npos || f == ".." || f.empty())
        return Status::Error(index_path.string() + ": weight_map['" + it.key() + "'] names a file outside the model folder");
      weight_map[it.key()] = f;
      if (unique.insert(f).second) files.push_back((fs::path(model_dir) / f).string());
    }
  } else {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(model_dir, ec))
      if (e.path().extension() == ".safetensors") files.push_back(e.path().string());
    if (ec) return Status::Error(model_dir + ": cannot list folder: " + ec.message());
    std::sort(files.begin(), files.end());
  }
  if (files.empty()) return Status::Error(model_dir + ": no .safetensors files (and no model.safetensors.index.json)");

  Checkpoint c;
  for (const auto& path : files) {
    DI_ASSIGN_OR_RETURN(MappedFile m, MappedFile::Open(path));
    auto file = std::make_unique<MappedFile>(std::move(m));
    auto name = std::make_unique<std::string>(path);
    DI_ASSIGN_OR_RETURN(auto tensors, parse_safetensors(file->data(), file->size(), path));
    for (auto& [tname, t] : tensors) {
      t.file = name.get();
      if (c.tensors_.count(tname))
        return Status::Error(path + ": tensor '" + tname + "' is also in " + *c.tensors_.at(tname).file);
      c.tensors_.emplace(tname, std::move(t));
    }
    c.files_.push_back(std::move(file));
    c.paths_.push_back(std::move(name));
  }
  for (const auto& [tname, f] : weight_map) {
    auto it = c.tensors_.find(tname);
    if (it == c.tensors_.end())
      return Status::Error(index_path.string() + ": tensor '" + tname + "' is listed in " + f + " but not found there");
    if (fs::path(*it->second.file).filename() != f)
      return Status::Error(index_path.string() + ": tensor '" + tname + "' is listed in " + f + " but found in " + *it->second.file);
  }
  return c;
}

const TensorView* Checkpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

size_t Checkpoint::total_bytes() const {
  size_t n = 0;
  for (const auto& [name, t] : tensors_) n += t.n_bytes;
  return n;
}

}  // namespace deepinfer
