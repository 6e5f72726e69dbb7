#include "acc/kernels/quantize.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "acc/kernels/convert.h"
#include "acc/kernels/detail/bf16_avx2.h"
#include "acc/kernels/detail/isa.h"
#include "acc/kernels/detail/parallel.h"
#include "acc/util/error.h"

namespace acc::kernels {
namespace {

constexpr int64_t kGrain = 1 << 16;  // elements per task: the kernels stream

// Blocks whose largest magnitude is below this come back as zeros: 127 / max would overflow
// f32 for the smallest values, and nothing a model trains with is this small.
constexpr float kFlushBelow = 1e-30f;

// The block's scale and the factor that maps it onto [-127, 127] (0 for a flushed block).
struct BlockScale {
  float scale, inv;
};
BlockScale block_scale(float max_abs) {
  if (!(max_abs >= kFlushBelow)) return {0.f, 0.f};
  return {max_abs / 127.f, 127.f / max_abs};
}

int8_t quantize_one(float x, float inv) {
  return static_cast<int8_t>(std::clamp(std::nearbyint(x * inv), -127.f, 127.f));
}

// Runs body(first element, elements, block index) over the blocks, in parallel tasks of
// whole blocks.
template <class Body>
void over_blocks(int64_t n, int64_t block, const Body& body) {
  ACC_CHECK(block > 0, "quantize: block must be positive, got ", block);
  detail::parallel_ranges(quant_blocks(n, block), std::max<int64_t>(1, kGrain / block), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) body(k * block, std::min(block, n - k * block), k);
  });
}

float max_abs_avx2(const float* x, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  __m256 m = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  float out = _mm_cvtss_f32(h);
  for (; i < n; ++i) out = std::max(out, std::fabs(x[i]));
  return out;
}

void quantize_block_avx2(const float* x, int64_t n, int8_t* q, float* scale) {
  const BlockScale s = block_scale(max_abs_avx2(x, n));
  *scale = s.scale;
  const __m256 inv = _mm256_set1_ps(s.inv);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // cvtps rounds to nearest even, as nearbyint does in the default rounding mode.
    __m256i r = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    r = _mm256_min_epi32(_mm256_max_epi32(r, lo), hi);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm_packs_epi16(w, w));
  }
  for (; i < n; ++i) q[i] = quantize_one(x[i], s.inv);
}

// The 8 values at q as floats, times scale.
__m256 dequantize8_avx2(const int8_t* q, __m256 scale) {
  const __m256i w = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(q)));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(w), scale);
}

void dequantize_block_avx2(const int8_t* q, float scale, int64_t n, float* out) {
  const __m256 s = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, dequantize8_avx2(q + i, s));
  for (; i < n; ++i) out[i] = static_cast<float>(q[i]) * scale;
}

void dequantize_block_bf16_avx2(const int8_t* q, float scale, int64_t n, bfloat16* out) {
  const __m256 s = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), detail::pack8_bf16(dequantize8_avx2(q + i, s)));
  for (; i < n; ++i) out[i] = to_bf16(static_cast<float>(q[i]) * scale);
}

// AVX-512F bodies, 16 lanes at a time (chosen at run time; the build targets x86-64-v3); the
// tails go through the AVX2 loops. Same operations, so the same bits.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's avx512fintrin.h, see convert.cpp
__attribute__((target("avx512f"))) void quantize_block_avx512(const float* x, int64_t n, int8_t* q, float* scale) {
  __m512 m = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
  alignas(64) float lanes[16];  // not _mm512_reduce_max_ps: GCC 12 warns inside it
  _mm512_store_ps(lanes, m);
  const BlockScale s = block_scale(std::max(*std::max_element(lanes, lanes + 16), max_abs_avx2(x + i, n - i)));
  *scale = s.scale;
  const __m512 inv = _mm512_set1_ps(s.inv);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (i = 0; i + 16 <= n; i += 16) {
    __m512i r = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
    r = _mm512_min_epi32(_mm512_max_epi32(r, lo), hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtsepi32_epi8(r));
  }
  for (; i < n; ++i) q[i] = quantize_one(x[i], s.inv);
}

__attribute__((target("avx512f"))) void dequantize_block_avx512(const int8_t* q, float scale, int64_t n, float* out) {
  const __m512 s = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i w = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i)));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_cvtepi32_ps(w), s));
  }
  dequantize_block_avx2(q + i, scale, n - i, out + i);
}
#pragma GCC diagnostic pop

}  // namespace

void quantize_int8(const float* x, int64_t n, int64_t block, int8_t* q, float* scales) {
  const auto body = detail::use_avx512() ? quantize_block_avx512 : quantize_block_avx2;
  over_blocks(n, block, [&](int64_t at, int64_t count, int64_t k) { body(x + at, count, q + at, scales + k); });
}

void dequantize_int8(const int8_t* q, const float* scales, int64_t n, int64_t block, float* out) {
  const auto body = detail::use_avx512() ? dequantize_block_avx512 : dequantize_block_avx2;
  over_blocks(n, block, [&](int64_t at, int64_t count, int64_t k) { body(q + at, scales[k], count, out + at); });
}

void dequantize_int8(const int8_t* q, const float* scales, int64_t n, int64_t block, bfloat16* out) {
  over_blocks(n, block, [&](int64_t at, int64_t count, int64_t k) {
    dequantize_block_bf16_avx2(q + at, scales[k], count, out + at);
  });
}

int64_t quantized_message_bytes(int64_t n, int64_t block) {
  return (n + 3) / 4 * 4 + 4 * quant_blocks(n, block);
}

void quantize_message(const float* x, int64_t n, int64_t block, void* message) {
  auto* q = static_cast<int8_t*>(message);
  quantize_int8(x, n, block, q, reinterpret_cast<float*>(q + (n + 3) / 4 * 4));
}

void dequantize_message(const void* message, int64_t n, int64_t block, float* out) {
  const auto* q = static_cast<const int8_t*>(message);
  dequantize_int8(q, reinterpret_cast<const float*>(q + (n + 3) / 4 * 4), n, block, out);
}

namespace ref {
void quantize_int8(const float* x, int64_t n, int64_t block, int8_t* q, float* scales) {
  for (int64_t at = 0, k = 0; at < n; at += block, ++k) {
    const int64_t end = std::min(n, at + block);
    float max_abs = 0;
    for (int64_t i = at; i < end; ++i) max_abs = std::max(max_abs, std::fabs(x[i]));
    const BlockScale s = block_scale(max_abs);
    scales[k] = s.scale;
    for (int64_t i = at; i < end; ++i) q[i] = quantize_one(x[i], s.inv);
  }
}

void dequantize_int8(const int8_t* q, const float* scales, int64_t n, int64_t block, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * scales[i / block];
}
}  // namespace ref

}  // namespace acc::kernels
