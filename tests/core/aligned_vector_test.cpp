// Unit tests for AlignedVector: its storage starts on a 64-byte line through every growth, for
// element types smaller than a line, and the elements survive reallocation as in std::vector;
// storage of 2 MiB or more starts on a 2 MiB boundary, advised for huge pages over whole ones.
#include "core/aligned_vector.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace deepinfer {
namespace {

template <class T>
bool on_line(const AlignedVector<T>& v) {
  return reinterpret_cast<uintptr_t>(v.data()) % kCacheLine == 0;
}

TEST(AlignedVector, StorageStartsOnALineThroughGrowth) {
  AlignedVector<uint16_t> u;
  AlignedVector<float> f;
  AlignedVector<uint8_t> b;
  // Sizes around malloc's small, medium and mmap thresholds, where plain new returns 16-byte
  // aligned storage.
  for (size_t n : {1u, 3u, 17u, 1000u, 4097u, 70000u, 300000u, 5u}) {
    u.resize(n, 7);
    f.resize(n, 1.5f);
    b.resize(n, 9);
    EXPECT_TRUE(on_line(u)) << n;
    EXPECT_TRUE(on_line(f)) << n;
    EXPECT_TRUE(on_line(b)) << n;
  }
  AlignedVector<float> copy = f;
  EXPECT_TRUE(on_line(copy));
  EXPECT_EQ(copy, f);
}

TEST(AlignedVector, KeepsElementsAcrossReallocation) {
  AlignedVector<int32_t> v;
  for (int32_t i = 0; i < 100000; ++i) v.push_back(i * 3);
  ASSERT_TRUE(on_line(v));
  for (int32_t i = 0; i < 100000; ++i) ASSERT_EQ(v[size_t(i)], i * 3);
}

// The VmFlags of the mapping that holds address a (/proc/self/smaps), or "" if none does.
std::string vm_flags_at(uintptr_t a) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {  // a mapping's first line: "lo-hi perms ..."
      inside = lo <= a && a < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST(AlignedVector, LargeStorageStartsOnAHugePageAdvisedForHugePages) {
  AlignedVector<float> big(size_t(3) << 20);  // 12 MiB
  const uintptr_t p = reinterpret_cast<uintptr_t>(big.data());
  EXPECT_EQ(p % kHugePage, 0u);
  // "hg": madvise(MADV_HUGEPAGE) covers its first and its last whole 2 MiB page.
  EXPECT_NE(vm_flags_at(p).find(" hg"), std::string::npos) << vm_flags_at(p);
  EXPECT_NE(vm_flags_at(p + 5 * kHugePage).find(" hg"), std::string::npos);
  big.assign(big.size(), 2.0f);
  EXPECT_EQ(big.back(), 2.0f);
  AlignedVector<uint8_t> small(kHugePage - 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % kCacheLine, 0u);
}

}  // namespace
}  // namespace deepinfer
