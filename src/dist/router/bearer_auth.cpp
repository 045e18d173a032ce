#include "dist/router/bearer_auth.h"

#include <algorithm>
#include <cctype>

namespace deepinfer::router {
namespace {

bool constant_time_equal(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) diff |= (i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0);
  return diff == 0;
}

std::string bearer_token(const std::string& authorization) {
  const size_t space = authorization.find(' ');
  if (space != 6) return "";
  for (size_t i = 0; i < 6; ++i)
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != "bearer"[i]) return "";
  const size_t start = authorization.find_first_not_of(' ', space);
  return start == std::string::npos ? "" : authorization.substr(start);
}

}  // namespace

bool bearer_authorized(const std::string& authorization, const std::string& key) {
  return key.empty() || constant_time_equal(bearer_token(authorization), key);
}

}  // namespace deepinfer::router
