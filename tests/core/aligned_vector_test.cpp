// Unit tests for AlignedVector: its storage starts on a 64-byte line through every growth, for
// element types smaller than a line, and the elements survive reallocation as in std::vector.
#include "core/aligned_vector.h"

#include <gtest/gtest.h>

#include <cstdint>

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

}  // namespace
}  // namespace deepinfer
