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
#include <cstdint>
#include <new>
#include <utility>
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

// CacheLineAllocator whose elements start default-initialized (trivial types: unwritten), for
// storage that is written whole before it is read: no zeroing pass, and each page is first
// touched by whichever thread writes it.
template <class T>
struct UninitCacheLineAllocator : CacheLineAllocator<T> {
  using value_type = T;
  UninitCacheLineAllocator() = default;
  template <class U>
  UninitCacheLineAllocator(const UninitCacheLineAllocator<U>&) noexcept {}
  template <class U>
  struct rebind {
    using other = UninitCacheLineAllocator<U>;
  };
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// Bytes on a cache line (huge pages from 2 MiB, as AlignedVector), not zeroed: every byte must be
// written before it is read.
using UninitBytes = std::vector<uint8_t, UninitCacheLineAllocator<uint8_t>>;

}  // namespace deepinfer
