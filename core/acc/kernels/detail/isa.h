#pragma once
// Which vector width the element-wise kernels use, chosen once at run time: the build targets
// x86-64-v3 (AVX2 + FMA), and kernels that have AVX-512F bodies use them where the CPU has it.
// ACC_NO_AVX512=1 keeps the AVX2 bodies, so an AVX-512 machine can test both.
namespace acc::kernels::detail {

bool use_avx512();

}  // namespace acc::kernels::detail
