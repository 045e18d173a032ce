// The prefill/decode control plane: typed, versioned binary messages carried as HTTP bodies
// (Content-Type application/x-deepinfer-pd) on the prefill worker's own port:
//
//   POST /internal/pd/v1/prefill   PrefillRequest -> 200 PrefillGrant (or 4xx/5xx, text)
//   POST /internal/pd/v1/release   Release        -> 200 ReleaseAck
//
// Every message: u32 magic "DIPD", u16 version, u16 type, then its fields, all little-endian,
// strings and arrays as a u32 count followed by the items. Decoders never trust a size: each
// count is checked against its limit and against the bytes left before anything is allocated,
// and trailing bytes are an error. Semantic checks against the local cache (layouts, kinds,
// block ids against the pool) are separate functions (check_*), run before any id is used.
//
// The exchange (see kv_transfer.h for the data plane and its safety argument): decode names the
// prompt's leading h = (n_prompt - 1) / block_size blocks by their tokens and lists the blocks it
// lacks (kind, index in the sequence's table); prefill computes them, pins its blocks holding
// them and answers with their ids, its UCX worker address and each kind's registered memory
// (base address and packed rkey) under a lease of lease_ms; decode reads them with ucp_get and
// sends Release, which unpins them; the ack says whether the lease still held at release.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace deepinfer::pd {

inline constexpr uint32_t kMagic = 0x44504944;  // bytes "DIPD"
inline constexpr uint16_t kVersion = 1;
inline constexpr std::string_view kContentType = "application/x-deepinfer-pd";

// Decoder limits: what a sane peer never exceeds.
inline constexpr uint32_t kMaxKinds = 6;                // kMaxKvKinds
inline constexpr uint32_t kMaxPromptTokens = 1u << 22;  // 4M tokens
inline constexpr uint32_t kMaxWantedBlocks = 1u << 20;
inline constexpr uint32_t kMaxNameBytes = 256;
inline constexpr uint32_t kMaxBlobBytes = 1u << 16;     // a packed UCX address or rkey
inline constexpr uint32_t kMaxLeaseMs = 3'600'000;

enum class MessageType : uint16_t { kPrefillRequest = 1, kPrefillGrant = 2, kRelease = 3, kReleaseAck = 4 };

// One KV kind as laid out in a worker's cache (KvCacheInfo).
struct KvKindLayout {
  uint32_t n_slabs = 0;
  uint64_t bytes_per_block = 0;  // per slab
  uint32_t lookback = 0;
  uint32_t n_blocks = 0;         // this worker's pool size (not compared)
  bool operator==(const KvKindLayout&) const = default;
};

// What both sides must agree on before a block moves: the model, the cache dtype and block size,
// and every kind's shape.
struct KvLayout {
  std::string model;     // architecture and shape, e.g. "DeepseekV3ForCausalLM vocab 4096 layers 4"
  uint8_t dtype = 0;     // core DType value
  uint32_t block_size = 0;
  std::vector<KvKindLayout> kinds;
  bool operator==(const KvLayout&) const = default;
};

struct BlockWant {
  uint32_t kind = 0;
  uint32_t index = 0;  // block index in the sequence's table: tokens [index * block_size, +block_size)
  bool operator==(const BlockWant&) const = default;
};

struct PrefillRequest {
  uint64_t transfer_id = 0;          // chosen by decode, unique per attempt
  KvLayout layout;                   // decode's
  std::vector<int32_t> tokens;       // the prompt's first h * block_size + 1 tokens
  std::vector<BlockWant> wanted;     // distinct, index < h
  bool operator==(const PrefillRequest&) const = default;
  uint32_t n_blocks_prefix() const { return layout.block_size ? uint32_t((tokens.size() - 1) / layout.block_size) : 0; }
};

// A kind's registered memory on the prefill worker: slab s, block b at base + (s * n_blocks + b) * bytes_per_block.
struct RemoteKind {
  uint64_t base = 0;
  std::string rkey;  // ucp_rkey_pack output
  bool operator==(const RemoteKind&) const = default;
};

struct PrefillGrant {
  uint64_t transfer_id = 0;
  uint32_t lease_ms = 0;            // the blocks stay pinned this long unless released sooner
  KvLayout layout;                  // prefill's (n_blocks bound the ids below)
  std::string worker_address;       // ucp_worker_get_address output
  std::vector<RemoteKind> kinds;    // [layout.kinds]
  std::vector<int32_t> blocks;      // prefill block ids, parallel to the request's wanted
  bool operator==(const PrefillGrant&) const = default;
};

struct Release {
  uint64_t transfer_id = 0;
  uint8_t completed = 0;  // 1: decode read the blocks; 0: abort (drop the transfer, computing or not)
  bool operator==(const Release&) const = default;
};

struct ReleaseAck {
  uint64_t transfer_id = 0;
  uint8_t lease_held = 0;  // 1: the blocks were pinned from the grant until this release
  bool operator==(const ReleaseAck&) const = default;
};

std::string encode(const PrefillRequest& m);
std::string encode(const PrefillGrant& m);
std::string encode(const Release& m);
std::string encode(const ReleaseAck& m);

// Errors name what is wrong ("PrefillRequest: tokens: count 99999999 over the limit ...").
Result<PrefillRequest> decode_prefill_request(std::string_view bytes);
Result<PrefillGrant> decode_prefill_grant(std::string_view bytes);
Result<Release> decode_release(std::string_view bytes);
Result<ReleaseAck> decode_release_ack(std::string_view bytes);

// Ok when two workers' caches can exchange blocks (everything but n_blocks equal); else names
// the first difference.
Status check_compatible(const KvLayout& local, const KvLayout& remote);
// Prefill side: the request's layout matches `local`, it has at least one full block and one
// more token, and every wanted block is a distinct (kind < n_kinds, index < h).
Status check_request(const PrefillRequest& m, const KvLayout& local);
// Decode side: the grant answers `request` (same id, one block per wanted, one RemoteKind per
// kind), its layout matches `local`, and every block id is inside the prefill's pool.
Status check_grant(const PrefillGrant& m, const PrefillRequest& request, const KvLayout& local);

}  // namespace deepinfer::pd
