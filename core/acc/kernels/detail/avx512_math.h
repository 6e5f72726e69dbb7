#pragma once
// 16-lane counterparts of avx2_math.h for kernels with AVX-512F bodies (used only where
// detail::use_avx512() says so). exp512 is exp256's algorithm lane for lane, so both widths
// give the same bits.
#include <immintrin.h>

#include <cstdint>

#include "acc/kernels/detail/exp_constants.h"

namespace acc::kernels::detail {

// exp(x) on 16 lanes: 0 below ln(FLT_MIN), +inf above ln(FLT_MAX), NaN kept.
__attribute__((target("avx512f"))) inline __m512 exp512(__m512 x) {
  const __m512 lo = _mm512_set1_ps(exp_constants::kLo), hi = _mm512_set1_ps(exp_constants::kHi);
  // As in exp256: max/min return the second operand when one is NaN, so NaN flows through.
  const __m512 xc = _mm512_min_ps(hi, _mm512_max_ps(lo, x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(exp_constants::kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(exp_constants::kLn2Hi), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(exp_constants::kLn2Lo), r);
  __m512 p = _mm512_set1_ps(exp_constants::kPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(exp_constants::kPoly[i]));
  const __m512 y = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  // 2^n as two factors: n spans [-126, 128], beyond one f32 exponent field.
  const __m512i ni = _mm512_cvtps_epi32(n), n1 = _mm512_srai_epi32(ni, 1), n2 = _mm512_sub_epi32(ni, n1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n1, bias), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(n2, bias), 23));
  __m512 out = _mm512_mul_ps(_mm512_mul_ps(y, s1), s2);
  out = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), out, _mm512_setzero_ps());
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), out,
                              _mm512_set1_ps(__builtin_inff()));
}

// 1 / (1 + exp(-x)) on 16 lanes, sigmoid256's operations lane for lane (the same bits).
__attribute__((target("avx512f"))) inline __m512 sigmoid512(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.f);
  return _mm512_div_ps(one, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
}

// Lanes [0, k) of 16, for masked loads and stores of a tail.
inline __mmask16 tail_mask16(int64_t k) {
  return static_cast<__mmask16>(k >= 16 ? 0xffff : (1u << k) - 1);
}

}  // namespace acc::kernels::detail
