// AlignedVector<T>: a std::vector whose storage starts on a cache line (64 bytes). Kernels that read
// rows at byte offsets that are multiples of 64 with 64-byte vector loads then never straddle two
// lines: a straddling load costs two, and the bf16 GEMM on split rows ran about 20 % slower on
// storage malloc left 16 bytes off a line (bench/RESULTS.md). Storage of 2 MiB or more starts on a
// 2 MiB boundary and asks the kernel for transparent huge pages over its whole 2 MiB pages
// (MADV_HUGEPAGE; the tail stays in 4 KiB pages, so nothing past the end becomes resident): the
// weights relaid at load stream through one TLB entry per 2 MiB instead of per 4 KiB (fp8 decode at
// batch 1 about 5 % faster, bench/RESULTS.md). Where the kernel's THP mode is "never" the advice
// changes nothing.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <new>
#include <vector>

namespace deepinfer {

inline constexpr std::size_t kCacheLine = 64;
inline constexpr std::size_t kHugePage = std::size_t(2) << 20;

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes < kHugePage) return static_cast<T*>(::operator new(bytes, std::align_val_t(kCacheLine)));
    void* p = ::operator new(bytes, std::align_val_t(kHugePage));
    (void)madvise(p, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    ::operator delete(p, bytes, std::align_val_t(bytes < kHugePage ? kCacheLine : kHugePage));
  }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept { return true; }
};

template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace deepinfer
