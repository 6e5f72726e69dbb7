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

// The largest value of each width: int8 [-127, 127], int4 [-7, 7] (symmetric, so -128 and -8
// are never used).
constexpr int kLevel8 = 127, kLevel4 = 7;

// The block's scale and the factor that maps it onto [-level, level] (0 for a flushed block).
struct BlockScale {
  float scale, inv;
};
BlockScale block_scale(float max_abs, int level) {
  if (!(max_abs >= kFlushBelow)) return {0.f, 0.f};
  const auto l = static_cast<float>(level);
  return {max_abs / l, l / max_abs};
}

int8_t quantize_one(float x, float inv, int level) {
  const auto l = static_cast<float>(level);
  return static_cast<int8_t>(std::clamp(std::nearbyint(x * inv), -l, l));
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

// q = x * inv rounded, within [-level, level].
void scale_avx2(const float* x, int64_t n, float inv_scale, int level, int8_t* q) {
  const __m256 inv = _mm256_set1_ps(inv_scale);
  const __m256i lo = _mm256_set1_epi32(-level), hi = _mm256_set1_epi32(level);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    // cvtps rounds to nearest even, as nearbyint does in the default rounding mode.
    __m256i r = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    r = _mm256_min_epi32(_mm256_max_epi32(r, lo), hi);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(q + i), _mm_packs_epi16(w, w));
  }
  for (; i < n; ++i) q[i] = quantize_one(x[i], inv_scale, level);
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
__attribute__((target("avx512f"))) float max_abs_avx512(const float* x, int64_t n) {
  __m512 m = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(m, _mm512_abs_ps(_mm512_loadu_ps(x + i)));
  alignas(64) float lanes[16];  // not _mm512_reduce_max_ps: GCC 12 warns inside it
  _mm512_store_ps(lanes, m);
  return std::max(*std::max_element(lanes, lanes + 16), max_abs_avx2(x + i, n - i));
}

__attribute__((target("avx512f"))) void scale_avx512(const float* x, int64_t n, float inv_scale, int level,
                                                     int8_t* q) {
  const __m512 inv = _mm512_set1_ps(inv_scale);
  const __m512i lo = _mm512_set1_epi32(-level), hi = _mm512_set1_epi32(level);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i r = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
    r = _mm512_min_epi32(_mm512_max_epi32(r, lo), hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), _mm512_cvtsepi32_epi8(r));
  }
  scale_avx2(x + i, n - i, inv_scale, level, q + i);
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

// The vector bodies of this CPU.
struct Bodies {
  float (*max_abs)(const float*, int64_t);
  void (*scale)(const float*, int64_t, float, int, int8_t*);
  void (*dequantize)(const int8_t*, float, int64_t, float*);
};
Bodies bodies() {
  if (detail::use_avx512()) return {max_abs_avx512, scale_avx512, dequantize_block_avx512};
  return {max_abs_avx2, scale_avx2, dequantize_block_avx2};
}

// int4 values go through int8 in pieces of this many, which stay in L1.
constexpr int64_t kPiece = 256;

// Two int4 values a byte, the first in the low nibble; n is even. 16 values at a time: as
// 16-bit lanes of two nibbles, lane | lane >> 4 puts both in its low byte.
void pack_int4(const int8_t* q, int64_t n, uint8_t* packed) {
  const __m128i nibble = _mm_set1_epi8(0x0F), low_byte = _mm_set1_epi16(0x00FF);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i lo = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + i)), nibble);
    const __m128i pairs = _mm_and_si128(_mm_or_si128(lo, _mm_srli_epi16(lo, 4)), low_byte);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(packed + i / 2), _mm_packus_epi16(pairs, pairs));
  }
  for (; i < n; i += 2) packed[i / 2] = static_cast<uint8_t>((q[i] & 0x0F) | (q[i + 1] << 4));
}

// Back to int8, sign-extending each nibble ((x ^ 8) - 8); n is even. 16 values at a time.
void unpack_int4(const uint8_t* packed, int64_t n, int8_t* q) {
  const __m128i nibble = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(packed + i / 2));
    const __m128i lo = _mm_and_si128(bytes, nibble), hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble);
    const __m128i values = _mm_sub_epi8(_mm_xor_si128(_mm_unpacklo_epi8(lo, hi), eight), eight);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), values);
  }
  for (; i < n; i += 2) {
    const auto byte = static_cast<int8_t>(packed[i / 2]);
    q[i] = static_cast<int8_t>(static_cast<int8_t>(byte << 4) >> 4);
    q[i + 1] = static_cast<int8_t>(byte >> 4);
  }
}

void check_int4_block(int64_t block) {
  ACC_CHECK(block > 0 && block % 2 == 0, "quantize: an int4 block must be a positive even number of elements "
            "(two values share a byte), got ", block);
}

// The bytes of a message's n values of `bits`, before its scales: whole words.
int64_t value_bytes(int64_t n, int bits) { return ((bits == 4 ? (n + 1) / 2 : n) + 3) / 4 * 4; }

}  // namespace

void quantize_int8(const float* x, int64_t n, int64_t block, int8_t* q, float* scales) {
  const Bodies b = bodies();
  over_blocks(n, block, [&](int64_t at, int64_t count, int64_t k) {
    const BlockScale s = block_scale(b.max_abs(x + at, count), kLevel8);
    scales[k] = s.scale;
    b.scale(x + at, count, s.inv, kLevel8, q + at);
  });
}

void dequantize_int8(const int8_t* q, const float* scales, int64_t n, int64_t block, float* out) {
  const Bodies b = bodies();
  over_blocks(n, block, [&](int64_t at, int64_t count, int64_t k) { b.dequantize(q + at, scales[k], count, out + at); });
}

void dequantize_int8(const int8_t* q, const float* scales, int64_t n, int64_t block, bfloat16* out) {
  over_blocks(n, block, [&](int64_t at, int64_t count, int64_t k) {
    dequantize_block_bf16_avx2(q + at, scales[k], count, out + at);
  });
}

void quantize_int4(const float* x, int64_t n, int64_t block, uint8_t* packed, float* scales) {
  check_int4_block(block);
  const Bodies b = bodies();
  over_blocks(n, block, [&](int64_t at, int64_t count, int64_t k) {
    const BlockScale s = block_scale(b.max_abs(x + at, count), kLevel4);
    scales[k] = s.scale;
    int8_t q[kPiece];
    for (int64_t i = 0; i < count; i += kPiece) {
      const int64_t m = std::min(kPiece, count - i);
      b.scale(x + at + i, m, s.inv, kLevel4, q);
      if (m % 2) q[m] = 0;  // n odd: the last byte's high nibble
      pack_int4(q, m + m % 2, packed + (at + i) / 2);
    }
  });
}

void dequantize_int4(const uint8_t* packed, const float* scales, int64_t n, int64_t block, float* out) {
  check_int4_block(block);
  const Bodies b = bodies();
  over_blocks(n, block, [&](int64_t at, int64_t count, int64_t k) {
    int8_t q[kPiece];
    for (int64_t i = 0; i < count; i += kPiece) {
      const int64_t m = std::min(kPiece, count - i);
      unpack_int4(packed + (at + i) / 2, m + m % 2, q);
      b.dequantize(q, scales[k], m, out + at + i);
    }
  });
}

int64_t quantized_message_bytes(int64_t n, int64_t block, int bits) {
  return value_bytes(n, bits) + 4 * quant_blocks(n, block);
}

void quantize_message(const float* x, int64_t n, int64_t block, int bits, void* message) {
  auto* bytes = static_cast<uint8_t*>(message);
  auto* scales = reinterpret_cast<float*>(bytes + value_bytes(n, bits));
  if (bits == 4)
    quantize_int4(x, n, block, bytes, scales);
  else
    quantize_int8(x, n, block, reinterpret_cast<int8_t*>(bytes), scales);
}

void dequantize_message(const void* message, int64_t n, int64_t block, int bits, float* out) {
  const auto* bytes = static_cast<const uint8_t*>(message);
  const auto* scales = reinterpret_cast<const float*>(bytes + value_bytes(n, bits));
  if (bits == 4)
    dequantize_int4(bytes, scales, n, block, out);
  else
    dequantize_int8(reinterpret_cast<const int8_t*>(bytes), scales, n, block, out);
}

namespace ref {
namespace {
// The plain loops of both widths: each block's scale, then store(i, q) for each element.
template <class Store>
void quantize_blocks(const float* x, int64_t n, int64_t block, int level, float* scales, const Store& store) {
  for (int64_t at = 0, k = 0; at < n; at += block, ++k) {
    const int64_t end = std::min(n, at + block);
    float max_abs = 0;
    for (int64_t i = at; i < end; ++i) max_abs = std::max(max_abs, std::fabs(x[i]));
    const BlockScale s = block_scale(max_abs, level);
    scales[k] = s.scale;
    for (int64_t i = at; i < end; ++i) store(i, quantize_one(x[i], s.inv, level));
  }
}
}  // namespace

void quantize_int8(const float* x, int64_t n, int64_t block, int8_t* q, float* scales) {
  quantize_blocks(x, n, block, kLevel8, scales, [q](int64_t i, int8_t v) { q[i] = v; });
}

void dequantize_int8(const int8_t* q, const float* scales, int64_t n, int64_t block, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(q[i]) * scales[i / block];
}

void quantize_int4(const float* x, int64_t n, int64_t block, uint8_t* packed, float* scales) {
  std::fill(packed, packed + (n + 1) / 2, uint8_t{0});
  quantize_blocks(x, n, block, kLevel4, scales, [packed](int64_t i, int8_t v) {
    const int nibble = v & 0x0F;
    packed[i / 2] = static_cast<uint8_t>(packed[i / 2] | (i % 2 ? nibble << 4 : nibble));
  });
}

void dequantize_int4(const uint8_t* packed, const float* scales, int64_t n, int64_t block, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    int v = i % 2 ? packed[i / 2] >> 4 : packed[i / 2] & 0x0F;
    if (v > 7) v -= 16;
    out[i] = static_cast<float>(v) * scales[i / block];
  }
}
}  // namespace ref

}  // namespace acc::kernels
