// FieldReader: typed, optional fields of one config.json object, remembering the first error
// (which names the file and the field). Shared by the model configs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace deepinfer {

// Reads optional typed fields of one JSON object, remembering the first error.
class FieldReader {
 public:
  using json = nlohmann::json;
  FieldReader(const json& j, std::string source) : j_(j), source_(std::move(source)) {}

  void integer(const char* key, int& out, bool required, int min_value = 0) {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) {
      if (required) fail(std::string("missing required field '") + key + "'");
      return;
    }
    if (!it->is_number_integer() && !(it->is_number_float() && it->get<double>() == double(int64_t(it->get<double>())))) {
      fail(std::string("field '") + key + "' must be an integer, got " + it->dump());
      return;
    }
    const int64_t v = it->is_number_integer() ? it->get<int64_t>() : int64_t(it->get<double>());
    if (v < min_value || v > (int64_t(1) << 30)) {
      fail(std::string("field '") + key + "' = " + std::to_string(v) + " is out of range");
      return;
    }
    out = int(v);
  }
  void number(const char* key, double& out, bool positive = false) {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return;
    if (!it->is_number()) return fail(std::string("field '") + key + "' must be a number, got " + it->dump());
    out = it->get<double>();
    if (positive && !(out > 0)) fail(std::string("field '") + key + "' must be positive");
  }
  void boolean(const char* key, bool& out) {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return;
    if (!it->is_boolean()) return fail(std::string("field '") + key + "' must be true or false, got " + it->dump());
    out = it->get<bool>();
  }
  std::string string(const char* key) {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return "";
    if (!it->is_string()) {
      fail(std::string("field '") + key + "' must be a string, got " + it->dump());
      return "";
    }
    return it->get<std::string>();
  }
  // An id or a list of ids (eos_token_id).
  void ids(const char* key, std::vector<int32_t>& out) {
    auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return;
    std::vector<int32_t> v;
    if (it->is_number_integer()) v.push_back(it->get<int32_t>());
    else if (it->is_array()) {
      for (const auto& e : *it) {
        if (!e.is_number_integer()) return fail(std::string("field '") + key + "' must hold integers");
        v.push_back(e.get<int32_t>());
      }
    } else {
      return fail(std::string("field '") + key + "' must be an integer or a list of integers");
    }
    out = std::move(v);
  }
  void fail(const std::string& message) {
    if (status_.ok()) status_ = Status::Error(source_ + ": " + message);
  }
  const Status& status() const { return status_; }

 private:
  const json& j_;
  std::string source_;
  Status status_;
};

}  // namespace deepinfer
