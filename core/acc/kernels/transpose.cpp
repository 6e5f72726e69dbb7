#include "acc/kernels/transpose.h"

#include <immintrin.h>

namespace acc::kernels {
namespace {

// The 8 x 8 tile at `in` to `out`, transposed.
inline void tile8(const float* in, int64_t is, float* out, int64_t os) {
  const __m256 r0 = _mm256_loadu_ps(in), r1 = _mm256_loadu_ps(in + is), r2 = _mm256_loadu_ps(in + 2 * is),
               r3 = _mm256_loadu_ps(in + 3 * is), r4 = _mm256_loadu_ps(in + 4 * is), r5 = _mm256_loadu_ps(in + 5 * is),
               r6 = _mm256_loadu_ps(in + 6 * is), r7 = _mm256_loadu_ps(in + 7 * is);
  // Pairs of rows interleaved, then pairs of pairs: each 128-bit lane holds a 4 x 4 block
  // transposed; the last step swaps the lanes into place.
  const __m256 a0 = _mm256_unpacklo_ps(r0, r1), a1 = _mm256_unpackhi_ps(r0, r1), a2 = _mm256_unpacklo_ps(r2, r3),
               a3 = _mm256_unpackhi_ps(r2, r3), a4 = _mm256_unpacklo_ps(r4, r5), a5 = _mm256_unpackhi_ps(r4, r5),
               a6 = _mm256_unpacklo_ps(r6, r7), a7 = _mm256_unpackhi_ps(r6, r7);
  const __m256 b0 = _mm256_shuffle_ps(a0, a2, 0x44), b1 = _mm256_shuffle_ps(a0, a2, 0xEE),
               b2 = _mm256_shuffle_ps(a1, a3, 0x44), b3 = _mm256_shuffle_ps(a1, a3, 0xEE),
               b4 = _mm256_shuffle_ps(a4, a6, 0x44), b5 = _mm256_shuffle_ps(a4, a6, 0xEE),
               b6 = _mm256_shuffle_ps(a5, a7, 0x44), b7 = _mm256_shuffle_ps(a5, a7, 0xEE);
  _mm256_storeu_ps(out, _mm256_permute2f128_ps(b0, b4, 0x20));
  _mm256_storeu_ps(out + os, _mm256_permute2f128_ps(b1, b5, 0x20));
  _mm256_storeu_ps(out + 2 * os, _mm256_permute2f128_ps(b2, b6, 0x20));
  _mm256_storeu_ps(out + 3 * os, _mm256_permute2f128_ps(b3, b7, 0x20));
  _mm256_storeu_ps(out + 4 * os, _mm256_permute2f128_ps(b0, b4, 0x31));
  _mm256_storeu_ps(out + 5 * os, _mm256_permute2f128_ps(b1, b5, 0x31));
  _mm256_storeu_ps(out + 6 * os, _mm256_permute2f128_ps(b2, b6, 0x31));
  _mm256_storeu_ps(out + 7 * os, _mm256_permute2f128_ps(b3, b7, 0x31));
}

}  // namespace

void transpose32(const float* in, int64_t in_stride, float* out, int64_t out_stride, int64_t rows, int64_t cols) {
  int64_t c = 0;
  for (; c + 16 <= cols; c += 16) {
    int64_t r = 0;
    for (; r + 8 <= rows; r += 8) {
      tile8(in + r * in_stride + c, in_stride, out + c * out_stride + r, out_stride);
      tile8(in + r * in_stride + c + 8, in_stride, out + (c + 8) * out_stride + r, out_stride);
    }
    ref::transpose32(in + r * in_stride + c, in_stride, out + c * out_stride + r, out_stride, rows - r, 16);
  }
  ref::transpose32(in + c, in_stride, out + c * out_stride, out_stride, rows, cols - c);
}

namespace ref {

void transpose32(const float* in, int64_t in_stride, float* out, int64_t out_stride, int64_t rows, int64_t cols) {
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t r = 0; r < rows; ++r) out[c * out_stride + r] = in[r * in_stride + c];
}

}  // namespace ref
}  // namespace acc::kernels
