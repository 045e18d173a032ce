#include "dist/router/retry_rule.h"

#include <cctype>

namespace deepinfer::router {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

}  // namespace

UpstreamAction upstream_action(int status, std::string_view retry_header, bool named_prefill, bool another_prefill) {
  while (!retry_header.empty() && (retry_header.back() == ' ' || retry_header.back() == '\t')) retry_header.remove_suffix(1);
  while (!retry_header.empty() && (retry_header.front() == ' ' || retry_header.front() == '\t')) retry_header.remove_prefix(1);
  if (status != 503 || !named_prefill || !iequals(retry_header, "prefill")) return UpstreamAction::kRelay;
  return another_prefill ? UpstreamAction::kRetryPrefill : UpstreamAction::kPrefillFailed;
}

}  // namespace deepinfer::router
