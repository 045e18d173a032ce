#include "dist/pd/pd_messages.h"

#include <cstring>
#include <set>
#include <utility>

namespace deepinfer::pd {

namespace {

class Writer {
 public:
  explicit Writer(MessageType type) {
    u32(kMagic);
    u16(kVersion);
    u16(uint16_t(type));
  }
  void u8(uint8_t v) { out_.push_back(char(v)); }
  void u16(uint16_t v) { le(v, 2); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void bytes(std::string_view s) {
    u32(uint32_t(s.size()));
    out_.append(s);
  }
  std::string take() { return std::move(out_); }

 private:
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(char((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

// Reads fields in order; the first failure sticks and every later read yields zeros.
class Reader {
 public:
  Reader(std::string_view in, const char* what) : in_(in), what_(what) {}

  bool header(MessageType type) {
    if (in_.size() < 8) return fail("truncated header (" + std::to_string(in_.size()) + " bytes)");
    if (u32() != kMagic) return fail("bad magic");
    const uint16_t version = u16();
    if (version != kVersion) return fail("version " + std::to_string(version) + " (this side speaks " + std::to_string(kVersion) + ")");
    const uint16_t t = u16();
    if (t != uint16_t(type)) return fail("message type " + std::to_string(t) + ", expected " + std::to_string(uint16_t(type)));
    return true;
  }
  uint8_t u8() { return uint8_t(le(1)); }
  uint16_t u16() { return uint16_t(le(2)); }
  uint32_t u32() { return uint32_t(le(4)); }
  uint64_t u64() { return le(8); }
  // A count of items of `item_bytes` each, within `limit` and the bytes left.
  uint32_t count(const char* field, uint32_t limit, size_t item_bytes) {
    const uint32_t n = u32();
    if (!error_.empty()) return 0;
    if (n > limit) {
      fail(std::string(field) + ": count " + std::to_string(n) + " over the limit of " + std::to_string(limit));
      return 0;
    }
    if (size_t(n) * item_bytes > in_.size() - pos_) {
      fail(std::string(field) + ": count " + std::to_string(n) + " exceeds the " + std::to_string(in_.size() - pos_) +
           " bytes left");
      return 0;
    }
    return n;
  }
  std::string bytes(const char* field, uint32_t limit) {
    const uint32_t n = count(field, limit, 1);
    if (!error_.empty()) return {};
    std::string s(in_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  template <typename T>
  Result<T> finish(T value) {
    if (error_.empty() && pos_ != in_.size()) fail(std::to_string(in_.size() - pos_) + " trailing bytes");
    if (!error_.empty()) return Status::Error(std::string(what_) + ": " + error_);
    return value;
  }
  bool fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }
  bool failed() const { return !error_.empty(); }

 private:
  uint64_t le(int n) {
    if (!error_.empty()) return 0;
    if (in_.size() - pos_ < size_t(n)) {
      fail("truncated at byte " + std::to_string(pos_));
      return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t(uint8_t(in_[pos_ + size_t(i)])) << (8 * i);
    pos_ += size_t(n);
    return v;
  }
  std::string_view in_;
  const char* what_;
  size_t pos_ = 0;
  std::string error_;
};

constexpr size_t kKindLayoutBytes = 4 + 8 + 4 + 4;

void write_layout(Writer& w, const KvLayout& l) {
  w.bytes(l.model);
  w.u8(l.dtype);
  w.u32(l.block_size);
  w.u32(uint32_t(l.kinds.size()));
  for (const KvKindLayout& k : l.kinds) {
    w.u32(k.n_slabs);
    w.u64(k.bytes_per_block);
    w.u32(k.lookback);
    w.u32(k.n_blocks);
  }
}

KvLayout read_layout(Reader& r) {
  KvLayout l;
  l.model = r.bytes("layout.model", kMaxNameBytes);
  l.dtype = r.u8();
  l.block_size = r.u32();
  const uint32_t n = r.count("layout.kinds", kMaxKinds, kKindLayoutBytes);
  l.kinds.resize(n);
  for (KvKindLayout& k : l.kinds) {
    k.n_slabs = r.u32();
    k.bytes_per_block = r.u64();
    k.lookback = r.u32();
    k.n_blocks = r.u32();
  }
  return l;
}

}  // namespace

std::string encode(const PrefillRequest& m) {
  Writer w(MessageType::kPrefillRequest);
  w.u64(m.transfer_id);
  write_layout(w, m.layout);
  w.u32(uint32_t(m.tokens.size()));
  for (int32_t t : m.tokens) w.u32(uint32_t(t));
  w.u32(uint32_t(m.wanted.size()));
  for (const BlockWant& b : m.wanted) {
    w.u32(b.kind);
    w.u32(b.index);
  }
  return w.take();
}

std::string encode(const PrefillGrant& m) {
  Writer w(MessageType::kPrefillGrant);
  w.u64(m.transfer_id);
  w.u32(m.lease_ms);
  write_layout(w, m.layout);
  w.bytes(m.worker_address);
  w.u32(uint32_t(m.kinds.size()));
  for (const RemoteKind& k : m.kinds) {
    w.u64(k.base);
    w.bytes(k.rkey);
  }
  w.u32(uint32_t(m.blocks.size()));
  for (int32_t b : m.blocks) w.u32(uint32_t(b));
  return w.take();
}

std::string encode(const Release& m) {
  Writer w(MessageType::kRelease);
  w.u64(m.transfer_id);
  w.u8(m.completed);
  return w.take();
}

std::string encode(const ReleaseAck& m) {
  Writer w(MessageType::kReleaseAck);
  w.u64(m.transfer_id);
  w.u8(m.lease_held);
  return w.take();
}

Result<PrefillRequest> decode_prefill_request(std::string_view bytes) {
  Reader r(bytes, "PrefillRequest");
  PrefillRequest m;
  if (r.header(MessageType::kPrefillRequest)) {
    m.transfer_id = r.u64();
    m.layout = read_layout(r);
    const uint32_t n_tokens = r.count("tokens", kMaxPromptTokens, 4);
    m.tokens.resize(n_tokens);
    for (int32_t& t : m.tokens) t = int32_t(r.u32());
    const uint32_t n_wanted = r.count("wanted", kMaxWantedBlocks, 8);
    m.wanted.resize(n_wanted);
    for (BlockWant& b : m.wanted) {
      b.kind = r.u32();
      b.index = r.u32();
    }
  }
  return r.finish(std::move(m));
}

Result<PrefillGrant> decode_prefill_grant(std::string_view bytes) {
  Reader r(bytes, "PrefillGrant");
  PrefillGrant m;
  if (r.header(MessageType::kPrefillGrant)) {
    m.transfer_id = r.u64();
    m.lease_ms = r.u32();
    if (!r.failed() && m.lease_ms > kMaxLeaseMs) r.fail("lease_ms " + std::to_string(m.lease_ms) + " over the limit");
    m.layout = read_layout(r);
    m.worker_address = r.bytes("worker_address", kMaxBlobBytes);
    const uint32_t n_kinds = r.count("kinds", kMaxKinds, 8 + 4);
    m.kinds.resize(n_kinds);
    for (RemoteKind& k : m.kinds) {
      k.base = r.u64();
      k.rkey = r.bytes("kinds.rkey", kMaxBlobBytes);
    }
    const uint32_t n_blocks = r.count("blocks", kMaxWantedBlocks, 4);
    m.blocks.resize(n_blocks);
    for (int32_t& b : m.blocks) b = int32_t(r.u32());
  }
  return r.finish(std::move(m));
}

Result<Release> decode_release(std::string_view bytes) {
  Reader r(bytes, "Release");
  Release m;
  if (r.header(MessageType::kRelease)) {
    m.transfer_id = r.u64();
    m.completed = r.u8();
    if (!r.failed() && m.completed > 1) r.fail("completed must be 0 or 1");
  }
  return r.finish(m);
}

Result<ReleaseAck> decode_release_ack(std::string_view bytes) {
  Reader r(bytes, "ReleaseAck");
  ReleaseAck m;
  if (r.header(MessageType::kReleaseAck)) {
    m.transfer_id = r.u64();
    m.lease_held = r.u8();
    if (!r.failed() && m.lease_held > 1) r.fail("lease_held must be 0 or 1");
  }
  return r.finish(m);
}

Status check_compatible(const KvLayout& local, const KvLayout& remote) {
  auto mismatch = [](const std::string& what, const std::string& here, const std::string& there) {
    return Status::Error("KV layout mismatch: " + what + " is " + here + " here, " + there + " on the peer");
  };
  if (local.model != remote.model) return mismatch("the model", "'" + local.model + "'", "'" + remote.model + "'");
  if (local.dtype != remote.dtype)
    return mismatch("the cache dtype", std::to_string(local.dtype), std::to_string(remote.dtype));
  if (local.block_size != remote.block_size)
    return mismatch("the block size", std::to_string(local.block_size), std::to_string(remote.block_size));
  if (local.kinds.size() != remote.kinds.size())
    return mismatch("the number of KV kinds", std::to_string(local.kinds.size()), std::to_string(remote.kinds.size()));
  for (size_t k = 0; k < local.kinds.size(); ++k) {
    const KvKindLayout &a = local.kinds[k], &b = remote.kinds[k];
    const std::string kind = "kind " + std::to_string(k) + "'s ";
    if (a.n_slabs != b.n_slabs) return mismatch(kind + "slabs", std::to_string(a.n_slabs), std::to_string(b.n_slabs));
    if (a.bytes_per_block != b.bytes_per_block)
      return mismatch(kind + "bytes per block", std::to_string(a.bytes_per_block), std::to_string(b.bytes_per_block));
    if (a.lookback != b.lookback) return mismatch(kind + "lookback", std::to_string(a.lookback), std::to_string(b.lookback));
  }
  return Status::Ok();
}

Status check_request(const PrefillRequest& m, const KvLayout& local) {
  DI_RETURN_IF_ERROR(check_compatible(local, m.layout));
  if (m.tokens.size() < size_t(local.block_size) + 1)
    return Status::Error("PrefillRequest: " + std::to_string(m.tokens.size()) + " tokens, fewer than a block and one more");
  if ((m.tokens.size() - 1) % local.block_size != 0)
    return Status::Error("PrefillRequest: " + std::to_string(m.tokens.size()) + " tokens is not whole blocks and one more");
  if (m.wanted.empty()) return Status::Error("PrefillRequest: no block wanted");
  const uint32_t h = m.n_blocks_prefix();
  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (const BlockWant& b : m.wanted) {
    if (b.kind >= local.kinds.size()) return Status::Error("PrefillRequest: wanted kind " + std::to_string(b.kind) + " out of range");
    if (b.index >= h)
      return Status::Error("PrefillRequest: wanted block index " + std::to_string(b.index) + " outside the prefix's " +
                           std::to_string(h) + " blocks");
    if (!seen.emplace(b.kind, b.index).second)
      return Status::Error("PrefillRequest: block " + std::to_string(b.index) + " of kind " + std::to_string(b.kind) +
                           " wanted twice");
  }
  return Status::Ok();
}

Status check_grant(const PrefillGrant& m, const PrefillRequest& request, const KvLayout& local) {
  if (m.transfer_id != request.transfer_id)
    return Status::Error("PrefillGrant: transfer " + std::to_string(m.transfer_id) + " answers no pending request");
  DI_RETURN_IF_ERROR(check_compatible(local, m.layout));
  if (m.kinds.size() != m.layout.kinds.size())
    return Status::Error("PrefillGrant: " + std::to_string(m.kinds.size()) + " remote kinds for " +
                         std::to_string(m.layout.kinds.size()) + " layout kinds");
  if (m.blocks.size() != request.wanted.size())
    return Status::Error("PrefillGrant: " + std::to_string(m.blocks.size()) + " blocks for " +
                         std::to_string(request.wanted.size()) + " wanted");
  if (m.worker_address.empty()) return Status::Error("PrefillGrant: empty worker address");
  for (size_t k = 0; k < m.kinds.size(); ++k) {
    const KvKindLayout& l = m.layout.kinds[k];
    const unsigned __int128 bytes = (unsigned __int128)l.n_blocks * l.n_slabs * l.bytes_per_block;
    if (m.kinds[k].rkey.empty()) return Status::Error("PrefillGrant: kind " + std::to_string(k) + " has no rkey");
    if (l.n_blocks == 0 || bytes > (unsigned __int128)(UINT64_MAX - m.kinds[k].base))
      return Status::Error("PrefillGrant: kind " + std::to_string(k) + "'s memory range is invalid");
  }
  for (size_t i = 0; i < m.blocks.size(); ++i) {
    const uint32_t kind = request.wanted[i].kind;
    if (kind >= m.layout.kinds.size() || m.blocks[i] < 0 || uint32_t(m.blocks[i]) >= m.layout.kinds[kind].n_blocks)
      return Status::Error("PrefillGrant: block id " + std::to_string(m.blocks[i]) + " outside the prefill pool of kind " +
                           std::to_string(kind));
  }
  return Status::Ok();
}

}  // namespace deepinfer::pd
