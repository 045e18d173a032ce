// Runtime choice of the CPU instruction set the kernels use. The best set the CPU supports is
// chosen once; DEEPINFER_CPU_ISA=portable|avx2|avx512|avx512bf16|amx lowers it (never raises it). Tests and
// benchmarks may switch it with set_active_isa() while no kernel runs. Results are bitwise
// reproducible for a given ISA; different ISAs may differ in the last bits.
#pragma once

#include <string_view>

namespace deepinfer::cpu {

// Ordered: each level runs on every CPU that runs the next. kAvx512Bf16 (AVX-512 BF16 and VBMI)
// differs from kAvx512 only for bf16 activations (LinearWeight::act_dtype), which it multiplies
// with VDPBF16PS. kAmx (AMX-TILE and AMX-BF16, with the tile state granted by the OS) differs
// from kAvx512Bf16 only for bf16 weights with bf16 activations, which run on AMX tiles at every
// batch size (so its bits differ from kAvx512Bf16's there).
enum class Isa { kPortable, kAvx2, kAvx512, kAvx512Bf16, kAmx };

std::string_view isa_name(Isa isa);
Isa best_supported_isa();  // what this CPU can run
Isa active_isa();          // what the kernels use now
bool set_active_isa(Isa isa);  // false (and no change) if the CPU cannot run `isa`

}  // namespace deepinfer::cpu
