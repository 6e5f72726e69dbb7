#include "acc/kernels/convert.h"

#include <immintrin.h>
#include <tbb/parallel_for.h>

#include "acc/kernels/detail/bf16_avx2.h"

namespace acc::kernels {
namespace {

constexpr int64_t kGrain = 1 << 16;

void f32_to_bf16_serial(const float* src, bfloat16* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), detail::pack8_bf16(_mm256_loadu_ps(src + i)));
  for (; i < n; ++i) dst[i] = to_bf16(src[i]);
}

void bf16_to_f32_serial(const bfloat16* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) dst[i] = to_f32(src[i]);
}

template <class Fn>
void parallel_chunks(int64_t n, Fn&& fn) {
  if (n <= kGrain) return fn(int64_t{0}, n);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, kGrain),
                    [&](const tbb::blocked_range<int64_t>& r) { fn(r.begin(), r.end()); });
}

}  // namespace

void f32_to_bf16(const float* src, bfloat16* dst, int64_t n) {
  parallel_chunks(n, [&](int64_t b, int64_t e) { f32_to_bf16_serial(src + b, dst + b, e - b); });
}

void bf16_to_f32(const bfloat16* src, float* dst, int64_t n) {
  parallel_chunks(n, [&](int64_t b, int64_t e) { bf16_to_f32_serial(src + b, dst + b, e - b); });
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
