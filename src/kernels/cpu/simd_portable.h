// 8-lane f32 "vectors" in plain C++ for CPUs without AVX2: the same kernels, compiled for any
// target. Same contract as simd_avx512.h.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace deepinfer::cpu {

struct Portable {
  struct F {
    float v[8];
  };
  static constexpr int kW = 8;

  static F zero() { return F{}; }
  static F bcast(float x) {
    F r;
    for (float& e : r.v) e = x;
    return r;
  }
  static F load(const float* p) { return load_n(p, kW); }
  static F load_n(const float* p, int n) {
    F r{};
    for (int i = 0; i < n; ++i) r.v[i] = p[i];
    return r;
  }
  static void store(float* p, F v) { store_n(p, v, kW); }
  static void store_n(float* p, F v, int n) {
    for (int i = 0; i < n; ++i) p[i] = v.v[i];
  }
  // Keeps v in a register, so a loaded vector reused by several FMAs is loaded once.
  static F pin(F v) { return v; }
  static F add(F a, F b) { return lanes(a, b, [](float x, float y) { return x + y; }); }
  static F mul(F a, F b) { return lanes(a, b, [](float x, float y) { return x * y; }); }
  static F div(F a, F b) { return lanes(a, b, [](float x, float y) { return x / y; }); }
  static F fma(F a, F b, F c) {
    for (int i = 0; i < kW; ++i) c.v[i] = std::fma(a.v[i], b.v[i], c.v[i]);
    return c;
  }
  static F max(F a, F b) { return lanes(a, b, [](float x, float y) { return x > y ? x : y; }); }
  static F min(F a, F b) { return lanes(a, b, [](float x, float y) { return x < y ? x : y; }); }
  static F round(F a) {
    for (float& e : a.v) e = std::nearbyint(e);
    return a;
  }
  static F scale_pow2(F a, F n) { return lanes(a, n, [](float x, float e) { return std::ldexp(x, int(e)); }); }
  static float hsum(F v) { return ((v.v[0] + v.v[4]) + (v.v[2] + v.v[6])) + ((v.v[1] + v.v[5]) + (v.v[3] + v.v[7])); }
  static float hmax(F v) {
    float m = v.v[0];
    for (int i = 1; i < kW; ++i) m = v.v[i] > m ? v.v[i] : m;
    return m;
  }

  static F from_bf16(const uint16_t* p) { return from_bf16_n(p, kW); }
  static F from_bf16_n(const uint16_t* p, int n) {
    F r{};
    for (int i = 0; i < n; ++i) r.v[i] = bf16_to_f32(p[i]);
    return r;
  }
  static F from_f16(const uint16_t* p) { return from_f16_n(p, kW); }
  static F from_f16_n(const uint16_t* p, int n) {
    F r{};
    for (int i = 0; i < n; ++i) r.v[i] = f16_to_f32(p[i]);
    return r;
  }
  // e4m3 -> value * 2^-8, as the SIMD versions.
  static F from_fp8(const uint8_t* p) { return from_fp8_n(p, kW); }
  static F from_fp8_n(const uint8_t* p, int n) {
    F r{};
    for (int i = 0; i < n; ++i) r.v[i] = fp8_e4m3_to_f32(p[i]) * 0.00390625f;
    return r;
  }
  // I8_SM -> its value.
  static F from_i8sm(const uint8_t* p) { return from_i8sm_n(p, kW); }
  static F from_i8sm_n(const uint8_t* p, int n) {
    F r{};
    for (int i = 0; i < n; ++i) r.v[i] = int8_sm_to_f32(p[i]);
    return r;
  }

 private:
  template <typename Op>
  static F lanes(F a, F b, Op op) {
    for (int i = 0; i < kW; ++i) a.v[i] = op(a.v[i], b.v[i]);
    return a;
  }
};

}  // namespace deepinfer::cpu
