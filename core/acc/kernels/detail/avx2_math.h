#pragma once
// AVX2+FMA building blocks shared by the element-wise kernels: horizontal reductions, masked
// tails, and an exp accurate to ~1 ulp (Cephes range reduction + degree-6 polynomial) from which
// sigmoid follows. Using the same vector math for tails keeps results independent of position.
#include <immintrin.h>

#include <cstdint>

#include "acc/kernels/detail/exp_constants.h"

namespace acc::kernels::detail {

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float hmax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lane mask selecting the first k (0..8) lanes, for _mm256_maskload_ps / _mm256_maskstore_ps.
inline __m256i tail_mask(int64_t k) {
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(k)), lanes);
}

// exp(x) on 8 lanes: 0 below ln(FLT_MIN) (no denormal results), +inf above ln(FLT_MAX), NaN kept.
inline __m256 exp256(__m256 x) {
  const __m256 lo = _mm256_set1_ps(exp_constants::kLo), hi = _mm256_set1_ps(exp_constants::kHi);
  // Operand order matters: max/min return their second operand when one is NaN, so NaN flows
  // through the clamp and poisons the result without a separate NaN blend.
  const __m256 xc = _mm256_min_ps(hi, _mm256_max_ps(lo, x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(exp_constants::kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n*ln2 with ln2 split in two so the reduction is exact in f32.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(exp_constants::kLn2Hi), xc);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(exp_constants::kLn2Lo), r);
  __m256 p = _mm256_set1_ps(exp_constants::kPoly[0]);
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(exp_constants::kPoly[i]));
  const __m256 y = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  // 2^n as two factors: n spans [-126, 128], beyond what one f32 exponent field can hold.
  const __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  __m256 out = _mm256_mul_ps(_mm256_mul_ps(y, s1), s2);
  out = _mm256_blendv_ps(out, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  return _mm256_blendv_ps(out, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
}

// 1 / (1 + exp(-x)); saturates cleanly to 0 and 1.
inline __m256 sigmoid256(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp256(_mm256_sub_ps(_mm256_setzero_ps(), x))));
}

// A group of up to 8 consecutive lanes: full groups use plain loads/stores, the tail is masked,
// so one loop body serves both and every element goes through the same vector math.
struct Lanes {
  __m256i mask;
  bool full;
  __m256 load(const float* p) const { return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask); }
  void store(float* p, __m256 v) const {
    if (full) _mm256_storeu_ps(p, v);
    else _mm256_maskstore_ps(p, mask, v);
  }
};

// Calls body(i, lanes) for i = 0, 8, 16, ... < n; the last group may be partial.
template <class Body>
void for_each_lanes(int64_t n, Body&& body) {
  const Lanes full{_mm256_set1_epi32(-1), true};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) body(i, full);
  if (i < n) body(i, Lanes{tail_mask(n - i), false});
}

}  // namespace acc::kernels::detail
