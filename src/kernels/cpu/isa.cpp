#include "kernels/cpu/isa.h"

#include <atomic>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <cstdlib>
#include <string>
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

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

// AMX-TILE and AMX-BF16 (leaf 7, sub-leaf 0, EDX bits 24 and 22), the OS saving the tile state
// (XCR0 bits 17 and 18), and this process granted it (Linux: arch_prctl ARCH_REQ_XCOMP_PERM for
// XTILEDATA; without the grant the first tile instruction faults).
bool has_usable_amx_bf16() {
#if defined(__linux__) && defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || (edx & (1u << 24)) == 0 || (edx & (1u << 22)) == 0)
    return false;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || (ecx & bit_OSXSAVE) == 0) return false;
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & (3u << 17)) != (3u << 17)) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

// CPUID leaf 0's vendor string.
bool is_intel() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return false;
  return ebx == 0x756e6547u && edx == 0x49656e69u && ecx == 0x6c65746eu;  // "GenuineIntel"
}
#endif

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl")) {
    if (!has_avx512_bf16_vbmi()) return Isa::kAvx512;
    if (has_usable_amx_bf16()) return Isa::kAmx;
    return is_intel() ? Isa::kAvx512Bf16Fma : Isa::kAvx512Bf16;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())
    return Isa::kAvx2;
#endif
  return Isa::kPortable;
}

Isa initial() {
  if (const char* env = std::getenv("DEEPINFER_CPU_ISA")) {
    const std::string v = env;
    const Isa want = v == "portable"         ? Isa::kPortable
                     : v == "avx2"           ? Isa::kAvx2
                     : v == "avx512"         ? Isa::kAvx512
                     : v == "avx512bf16"     ? Isa::kAvx512Bf16
                     : v == "avx512bf16-fma" ? Isa::kAvx512Bf16Fma
                                             : Isa::kAmx;
    if (cpu_runs(want)) return want;
  }
  return best_supported_isa();
}

std::atomic<Isa>& active() {
  static std::atomic<Isa> isa{initial()};
  return isa;
}

}  // namespace

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAmx: return "amx";
    case Isa::kAvx512Bf16Fma: return "avx512bf16-fma";
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

bool cpu_runs(Isa isa) {
  const Isa best = best_supported_isa();
  if (isa == Isa::kAvx512Bf16Fma) return int(best) >= int(Isa::kAvx512Bf16);
  return int(isa) <= int(best);
}

bool set_active_isa(Isa isa) {
  if (!cpu_runs(isa)) return false;
  active().store(isa, std::memory_order_relaxed);
  return true;
}

}  // namespace deepinfer::cpu
