#include "grammar/text_until.h"

#include <map>
#include <vector>

namespace deepinfer::grammar {

Result<uint32_t> define_text_until(GrammarBuilder& b, const std::string& name, std::string_view marker, bool may_end,
                                   std::optional<uint32_t> then) {
  if (marker.empty()) return Status::Error("free text rule '" + name + "': empty marker");
  const size_t m = marker.size();
  // fail[i]: the longest proper prefix of marker[0, i) that is also its suffix.
  std::vector<size_t> fail(m + 1, 0);
  for (size_t i = 2, k = 0; i <= m; ++i) {
    while (k > 0 && marker[k] != marker[i - 1]) k = fail[k];
    if (marker[k] == marker[i - 1]) ++k;
    fail[i] = k;
  }
  std::vector<uint32_t> ids(m);
  ids[0] = b.declare(name);
  for (size_t i = 1; i < m; ++i) ids[i] = b.declare(name + "/text" + std::to_string(i));
  for (size_t i = 0; i < m; ++i) {
    // State i: the text ends with marker[0, i) and no longer prefix of it. Bytes by next state.
    std::map<size_t, ByteSet> by_next;
    for (unsigned c = 0; c < 256; ++c) {
      size_t k = i;
      while (k > 0 && uint8_t(marker[k]) != c) k = fail[k];
      if (uint8_t(marker[k]) == c) ++k;
      by_next[k].add(uint8_t(c));
    }
    std::vector<Expr> options;
    if (may_end) options.push_back(Expr::Empty());
    for (const auto& [next, bytes] : by_next) {
      if (next < m) {
        options.push_back(Expr::Seq({Expr::Bytes(bytes), Expr::Ref(ids[next])}));
      } else if (then) {
        options.push_back(Expr::Seq({Expr::Bytes(bytes), Expr::Ref(*then)}));
      }
    }
    DI_RETURN_IF_ERROR(b.define(ids[i], Expr::Alt(std::move(options))));
  }
  return ids[0];
}

}  // namespace deepinfer::grammar
