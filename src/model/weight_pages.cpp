#include "model/weight_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace deepinfer {
namespace {
constexpr uintptr_t kPage = 4096;
}  // namespace

void prefault_pages(const LinearWeight& w) {
  if (w.data == nullptr) return;
  const size_t bytes = weight_data_bytes(w);
  const uintptr_t begin = reinterpret_cast<uintptr_t>(w.data) & ~(kPage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(w.data) + bytes + kPage - 1) & ~(kPage - 1);
#ifdef MADV_POPULATE_READ
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ) == 0) return;
#endif
  const volatile uint8_t* p = static_cast<const uint8_t*>(w.data);  // older kernels: touch each page
  for (size_t off = 0; off < bytes; off += kPage) (void)p[off];
}

namespace {
// The whole pages inside [p, p + bytes).
void drop(const void* p, size_t bytes) {
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + kPage - 1) & ~(kPage - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kPage - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}
}  // namespace

void release_pages(const LinearWeight& w) {
  if (w.data == nullptr) return;
  drop(w.data, weight_data_bytes(w));
  if (w.dtype == DType::F8_E4M3 && w.scale_inv) drop(w.scale_inv, weight_scale_bytes(w));
  if (w.dtype == DType::F4_E2M1 && w.scale_e8m0) drop(w.scale_e8m0, weight_scale_bytes(w));
}

size_t relay_into(Backend& backend, LinearWeight& w, std::deque<UninitBytes>& store, bool keep_pages) {
  const size_t bytes = w.data ? backend.relaid_bytes(w) : 0;
  if (bytes == 0) return 0;
  const LinearWeight stored = w;
  w = backend.relay_weight(stored, store.emplace_back(bytes).data());
  if (!keep_pages) release_pages(stored);
  return bytes;
}

}  // namespace deepinfer
