// Runtime choice of the CPU instruction set the kernels use. The preferred level for the CPU is
// chosen once; DEEPINFER_CPU_ISA=portable|avx2|avx512|avx512bf16|avx512bf16-fma|amx selects another
// one the CPU runs. Tests and benchmarks may switch it with set_active_isa() while no kernel runs.
// Results are bitwise reproducible for a given ISA; different ISAs may differ in the last bits.
#pragma once

#include <string_view>

namespace deepinfer::cpu {

// Ordered: each level runs on every CPU that runs the next. kAvx512Bf16 (AVX-512 BF16 and VBMI)
// differs from kAvx512 only for bf16 activations (LinearWeight::act_dtype), which it multiplies
// with VDPBF16PS. kAvx512Bf16Fma needs the same CPU features and differs from kAvx512Bf16 only in
// how those bf16 products accumulate: split exactly into f32 and added by FMAs, preferred on Intel
// cores, where VDPBF16PS issues every other cycle (simd_avx512_bf16.h); VDPBF16PS stays preferred
// elsewhere (AMD Zen 4/5 run it at full rate). kAmx (AMX-TILE and AMX-BF16, with the tile state
// granted by the OS) differs from kAvx512Bf16Fma only for bf16, fp8 and FP4 weights with bf16
// activations, which run on AMX tiles at every batch size.
enum class Isa { kPortable, kAvx2, kAvx512, kAvx512Bf16, kAvx512Bf16Fma, kAmx };

std::string_view isa_name(Isa isa);
Isa best_supported_isa();  // the level preferred on this CPU
bool cpu_runs(Isa isa);     // whether this CPU can run `isa` (every level up to the best, and
                            // avx512bf16-fma wherever avx512bf16 runs)
Isa active_isa();          // what the kernels use now
bool set_active_isa(Isa isa);  // false (and no change) if the CPU cannot run `isa`

}  // namespace deepinfer::cpu
