#include "kernels/cpu/isa.h"

#include <atomic>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <cstdlib>
#include <string>

namespace deepinfer::cpu {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// From CPUID leaf 1 (clang's __builtin_cpu_supports does not know "f16c").
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

// CPUID leaf 7, sub-leaf 1, EAX bit 5 (compilers' __builtin_cpu_supports names differ), and
// AVX512_VBMI (leaf 7, sub-leaf 0, ECX bit 1), whose byte permutes convert fp8 to bf16.
bool has_avx512_bf16_vbmi() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || (ecx & (1u << 1)) == 0) return false;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5)) != 0;
}
#endif

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return has_avx512_bf16_vbmi() ? Isa::kAvx512Bf16 : Isa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())
    return Isa::kAvx2;
#endif
  return Isa::kPortable;
}

Isa initial() {
  Isa isa = best_supported_isa();
  if (const char* env = std::getenv("DEEPINFER_CPU_ISA")) {
    const std::string v = env;
    const Isa want = v == "portable" ? Isa::kPortable
                     : v == "avx2"   ? Isa::kAvx2
                     : v == "avx512" ? Isa::kAvx512
                                     : Isa::kAvx512Bf16;
    if (int(want) < int(isa)) isa = want;
  }
  return isa;
}

std::atomic<Isa>& active() {
  static std::atomic<Isa> isa{initial()};
  return isa;
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512Bf16: return "avx512bf16";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvx2: return "avx2";
    default: return "portable";
  }
}

Isa best_supported_isa() {
  static const Isa best = detect();
  return best;
}

Isa active_isa() { return active().load(std::memory_order_relaxed); }

bool set_active_isa(Isa isa) {
  if (int(isa) > int(best_supported_isa())) return false;
  active().store(isa, std::memory_order_relaxed);
  return true;
}

}  // namespace deepinfer::cpu
