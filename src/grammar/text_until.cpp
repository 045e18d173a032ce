#include "grammar/text_until.h"

#include <map>
#include <vector>

namespace deepinfer::grammar {
namespace {

bool ends_with(const std::string& t, const std::string& s) {
  return t.size() >= s.size() && t.compare(t.size() - s.size(), s.size(), s) == 0;
}

}  // namespace

Result<uint32_t> define_text_until(GrammarBuilder& b, const std::string& name, std::string_view marker, bool may_end,
                                   std::optional<uint32_t> then, const std::vector<std::string>& forbidden) {
  if (marker.empty()) return Status::Error("free text rule '" + name + "': empty marker");
  for (const std::string& f : forbidden)
    if (f.empty()) return Status::Error("free text rule '" + name + "': empty forbidden text");
  const std::string m(marker);
  std::vector<std::string> patterns = forbidden;
  patterns.push_back(m);
  // The longest suffix of `t` that is a proper prefix of a pattern.
  const auto state_of = [&](const std::string& t) {
    for (size_t n = t.size(); n > 0; --n) {
      const std::string_view suffix = std::string_view(t).substr(t.size() - n);
      for (const std::string& p : patterns)
        if (n < p.size() && std::string_view(p).substr(0, n) == suffix) return std::string(suffix);
    }
    return std::string();
  };
  // Whether every forbidden occurrence in `t` lies within its longest suffix that is a prefix of
  // the marker (an occurrence the marker may still cover).
  const auto covered = [&](const std::string& t) {
    size_t cover = 0;
    for (size_t n = std::min(t.size(), m.size()); n > 0; --n) {
      if (ends_with(t, m.substr(0, n))) {
        cover = n;
        break;
      }
    }
    for (const std::string& f : forbidden) {
      for (size_t at = t.find(f); at != std::string::npos; at = t.find(f, at + 1))
        if (at < t.size() - cover) return false;
    }
    return true;
  };
  // States: the text's longest suffix that is a proper prefix of a pattern, found from "".
  std::vector<std::string> states{""};
  std::map<std::string, size_t> index{{"", 0}};
  std::vector<uint32_t> ids{b.declare(name)};
  std::vector<std::vector<Expr>> options(1);
  for (size_t i = 0; i < states.size(); ++i) {
    const std::string s = states[i];
    // Every forbidden occurrence lies within s: the text may end when s holds none.
    bool clean = true;
    for (const std::string& f : forbidden) clean = clean && s.find(f) == std::string::npos;
    if (may_end && clean) options[i].push_back(Expr::Empty());
    std::map<size_t, ByteSet> by_next;  // next state (states.size() + 0: the marker completed)
    ByteSet to_then;
    for (unsigned c = 0; c < 256; ++c) {
      const std::string t = s + char(c);
      if (!covered(t)) continue;
      if (ends_with(t, m)) {
        to_then.add(uint8_t(c));
        continue;
      }
      const std::string next = state_of(t);
      auto [it, added] = index.emplace(next, states.size());
      if (added) {
        states.push_back(next);
        ids.push_back(b.declare(name + "/text" + std::to_string(it->second)));
        options.emplace_back();
      }
      by_next[it->second].add(uint8_t(c));
    }
    for (const auto& [next, bytes] : by_next) options[i].push_back(Expr::Seq({Expr::Bytes(bytes), Expr::Ref(ids[next])}));
    if (then && !to_then.empty()) options[i].push_back(Expr::Seq({Expr::Bytes(to_then), Expr::Ref(*then)}));
  }
  for (size_t i = 0; i < states.size(); ++i) {
    if (options[i].empty()) return Status::Error("free text rule '" + name + "': a text that can neither end nor go on");
    DI_RETURN_IF_ERROR(b.define(ids[i], Expr::Alt(std::move(options[i]))));
  }
  return ids[0];
}

}  // namespace deepinfer::grammar
