// AlignedVector<T>: a std::vector whose storage starts on a cache line (64 bytes). Kernels that read
// rows at byte offsets that are multiples of 64 with 64-byte vector loads then never straddle two
// lines: a straddling load costs two, and the bf16 GEMM on split rows ran about 20 % slower on
// storage malloc left 16 bytes off a line (bench/RESULTS.md).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace deepinfer {

inline constexpr std::size_t kCacheLine = 64;

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kCacheLine))); }
  void deallocate(T* p, std::size_t n) noexcept { ::operator delete(p, n * sizeof(T), std::align_val_t(kCacheLine)); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept { return true; }
};

template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace deepinfer
