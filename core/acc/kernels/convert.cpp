#include "acc/kernels/convert.h"

#include <immintrin.h>

#include "acc/kernels/detail/bf16_avx2.h"
#include "acc/kernels/detail/isa.h"
#include "acc/kernels/detail/parallel.h"

namespace acc::kernels {
namespace {

// Conversions are pure streaming; a task should move at least this many elements.
constexpr int64_t kGrain = 1 << 16;

void f32_to_bf16_avx2(const float* src, bfloat16* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), detail::pack8_bf16(_mm256_loadu_ps(src + i)));
  for (; i < n; ++i) dst[i] = to_bf16(src[i]);
}

void bf16_to_f32_avx2(const bfloat16* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) dst[i] = to_f32(src[i]);
}

// AVX-512F bodies, 16 lanes at a time, for CPUs that have it (chosen at run time; the build
// targets x86-64-v3). The tails fall back to the AVX2 loops. Same rounding as pack8_bf16.
// GCC 12's avx512fintrin.h passes _mm512_undefined_* as the pass-through operand, which
// -Wmaybe-uninitialized misreports in callers; the warning is silenced for these two only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) void f32_to_bf16_avx512(const float* src, bfloat16* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 f = _mm512_loadu_ps(src + i);
    const __m512i u = _mm512_castps_si512(f), hi = _mm512_srli_epi32(u, 16);
    const __m512i lsb = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
    r = _mm512_mask_or_epi32(r, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), hi, _mm512_set1_epi32(0x40));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(r));
  }
  f32_to_bf16_avx2(src + i, dst + i, n - i);
}

__attribute__((target("avx512f"))) void bf16_to_f32_avx512(const bfloat16* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }
  bf16_to_f32_avx2(src + i, dst + i, n - i);
}
#pragma GCC diagnostic pop

}  // namespace

void f32_to_bf16(const float* src, bfloat16* dst, int64_t n) {
  const auto body = detail::use_avx512() ? f32_to_bf16_avx512 : f32_to_bf16_avx2;
  detail::parallel_ranges(n, kGrain, [&](int64_t b, int64_t e) { body(src + b, dst + b, e - b); });
}

void bf16_to_f32(const bfloat16* src, float* dst, int64_t n) {
  const auto body = detail::use_avx512() ? bf16_to_f32_avx512 : bf16_to_f32_avx2;
  detail::parallel_ranges(n, kGrain, [&](int64_t b, int64_t e) { body(src + b, dst + b, e - b); });
}

namespace ref {
void f32_to_bf16(const float* src, bfloat16* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = to_bf16(src[i]);
}
void bf16_to_f32(const bfloat16* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = to_f32(src[i]);
}
}  // namespace ref

}  // namespace acc::kernels
