#include "kernels/cpu/isa.h"

#include <atomic>
#include <cstdlib>
#include <string>

namespace deepinfer::cpu {
namespace {

Isa detect() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    return Isa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
    return Isa::kAvx2;
#endif
  return Isa::kPortable;
}

Isa initial() {
  Isa isa = best_supported_isa();
  if (const char* env = std::getenv("DEEPINFER_CPU_ISA")) {
    const std::string v = env;
    const Isa want = v == "portable" ? Isa::kPortable : v == "avx2" ? Isa::kAvx2 : Isa::kAvx512;
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
