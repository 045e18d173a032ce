// A multiply-add chain, compiled twice by tests/core/CMakeLists.txt under two CPU tunings with FMA
// available; FP_PROBE_NAME names each copy. See build_arithmetic_test.cpp.
float FP_PROBE_NAME(const float* a, const float* b, int n) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
