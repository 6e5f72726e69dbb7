#pragma once
// Register-blocked f32 product for the small blocks inside fused kernels (attention tiles of
// ~64x64x64), where a oneDNN call per tile costs more in dispatch than the arithmetic.
//   C[M,N] (+)= A * B,  A(r, k) = A[r * a_row + k * a_col]  (so A^T is just swapped strides),
//                       B row-major with leading dimension ldb, C row-major with ldc.
// Single-threaded: callers parallelise over tiles.
#include <cstdint>

namespace acc::kernels::detail {

void block_gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_row, int64_t a_col,
                const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate);

}  // namespace acc::kernels::detail
