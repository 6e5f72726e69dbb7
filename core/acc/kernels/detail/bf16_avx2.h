#pragma once
// AVX2 f32 -> bf16 packing shared by the conversion kernel and the optimizers' bf16 copy.
#include <immintrin.h>

namespace acc::kernels::detail {

// Round-to-nearest-even of 8 floats to bf16 with NaNs made quiet: the vector twin of to_bf16.
inline __m128i pack8_bf16(__m256 f) {
  const __m256i u = _mm256_castps_si256(f);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
  r = _mm256_srli_epi32(r, 16);
  const __m256i quiet_nan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  const __m256 is_nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);
  r = _mm256_blendv_epi8(r, quiet_nan, _mm256_castps_si256(is_nan));
  // Narrow 8 x u32 (each < 65536) to 8 x u16; packus cannot saturate such values.
  const __m128i lo = _mm256_castsi256_si128(r), hi = _mm256_extracti128_si256(r, 1);
  return _mm_packus_epi32(lo, hi);
}

}  // namespace acc::kernels::detail
