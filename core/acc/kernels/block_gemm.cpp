#include "acc/kernels/block_gemm.h"

#include <immintrin.h>

#include "acc/kernels/detail/avx2_math.h"

namespace acc::kernels::detail {
namespace {

constexpr int kTileRows = 6;  // 6 rows x 2 vectors = 12 accumulators + 2 B + 1 broadcast <= 16 ymm
constexpr int64_t kTileCols = 16;

// One R x 16 tile of C (cols <= 16 valid columns), kept in registers over the whole K loop.
template <int R, bool kFull>
void tile(int64_t K, const float* A, int64_t a_row, int64_t a_col, const float* B, int64_t ldb,
          float* C, int64_t ldc, int64_t cols, bool accumulate) {
  const __m256i m0 = tail_mask(cols), m1 = tail_mask(cols - 8);
  auto load = [&](const float* p, int half) {
    if constexpr (kFull)
      return _mm256_loadu_ps(p + 8 * half);
    else
      return _mm256_maskload_ps(p + 8 * half, half ? m1 : m0);
  };
  // Fully unrolled row loops let GCC keep c[][] in registers instead of spilling every step.
  __m256 c[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2; ++h) c[r][h] = accumulate ? load(C + r * ldc, h) : _mm256_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m256 b0 = load(B + k * ldb, 0), b1 = load(B + k * ldb, 1);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(A + r * a_row + k * a_col);
      c[r][0] = _mm256_fmadd_ps(a, b0, c[r][0]);
      c[r][1] = _mm256_fmadd_ps(a, b1, c[r][1]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    for (int h = 0; h < 2; ++h) {
      if constexpr (kFull)
        _mm256_storeu_ps(C + r * ldc + 8 * h, c[r][h]);
      else
        _mm256_maskstore_ps(C + r * ldc + 8 * h, h ? m1 : m0, c[r][h]);
    }
}

template <int R>
void row_strip(int64_t N, int64_t K, const float* A, int64_t a_row, int64_t a_col, const float* B,
               int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  int64_t j = 0;
  for (; j + kTileCols <= N; j += kTileCols)
    tile<R, true>(K, A, a_row, a_col, B + j, ldb, C + j, ldc, kTileCols, accumulate);
  if (j < N) tile<R, false>(K, A, a_row, a_col, B + j, ldb, C + j, ldc, N - j, accumulate);
}

}  // namespace

void block_gemm(int64_t M, int64_t N, int64_t K, const float* A, int64_t a_row, int64_t a_col,
                const float* B, int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  int64_t i = 0;
  for (; i + kTileRows <= M; i += kTileRows)
    row_strip<kTileRows>(N, K, A + i * a_row, a_row, a_col, B, ldb, C + i * ldc, ldc, accumulate);
  const float* a = A + i * a_row;
  float* c = C + i * ldc;
  switch (M - i) {
    case 5:
      return row_strip<5>(N, K, a, a_row, a_col, B, ldb, c, ldc, accumulate);
    case 4:
      return row_strip<4>(N, K, a, a_row, a_col, B, ldb, c, ldc, accumulate);
    case 3:
      return row_strip<3>(N, K, a, a_row, a_col, B, ldb, c, ldc, accumulate);
    case 2:
      return row_strip<2>(N, K, a, a_row, a_col, B, ldb, c, ldc, accumulate);
    case 1:
      return row_strip<1>(N, K, a, a_row, a_col, B, ldb, c, ldc, accumulate);
    default:
      return;
  }
}

}  // namespace acc::kernels::detail
