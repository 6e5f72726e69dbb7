#include "acc/distributed/reduce_kernels.h"

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "acc/kernels/convert.h"
#include "acc/util/error.h"

namespace acc::dist::kernels {
namespace {

// Integer sums wrap: add as unsigned so overflow is defined.
template <class T, class U>
void add_wrapping(T* acc, const T* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    acc[i] = static_cast<T>(static_cast<U>(acc[i]) + static_cast<U>(src[i]));
}

void check_scale(DType dtype, float scale) {
  ACC_CHECK(is_floating(dtype) || scale == 1.f, "store_accumulator: scale ", scale,
            " on ", dtype_name(dtype), "; integer results cannot be scaled");
}

// Widen 8 bf16 values to f32: the bf16 bits are the top half of the f32.
inline __m256 load8_bf16(const bfloat16* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

}  // namespace

void copy_streaming(void* dst_v, const void* src_v, size_t bytes) {
  auto* dst = static_cast<char*>(dst_v);
  const auto* src = static_cast<const char*>(src_v);
  // Plain copy up to the first 32-byte aligned destination, streamed body, plain tail.
  const size_t head = std::min(bytes, (32 - reinterpret_cast<uintptr_t>(dst) % 32) % 32);
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 128 <= bytes; i += 128)
    for (size_t j = 0; j < 128; j += 32)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + j),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + j)));
  std::memcpy(dst + i, src + i, bytes - i);
  _mm_sfence();
}

void copy_twice(void* dst_a, void* dst_b, const void* src_v, size_t bytes, bool stream_a) {
  auto* a = static_cast<char*>(dst_a);
  auto* b = static_cast<char*>(dst_b);
  const auto* src = static_cast<const char*>(src_v);
  // Streaming stores need a 32-byte aligned destination: plain head up to it.
  const size_t head = stream_a ? std::min(bytes, (32 - reinterpret_cast<uintptr_t>(a) % 32) % 32) : 0;
  std::memcpy(a, src, head);
  std::memcpy(b, src, head);
  size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
    if (stream_a) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(a + i), lo);
      _mm256_stream_si256(reinterpret_cast<__m256i*>(a + i + 32), hi);
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a + i), lo);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a + i + 32), hi);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b + i), lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(b + i + 32), hi);
  }
  std::memcpy(a + i, src + i, bytes - i);
  std::memcpy(b + i, src + i, bytes - i);
  if (stream_a) _mm_sfence();
}

void load_accumulator(void* acc, const void* src, DType dtype, int64_t n) {
  if (n == 0) return;  // empty buffers may be null, which memcpy must not get
  if (dtype == DType::bf16)
    acc::kernels::bf16_to_f32(static_cast<const bfloat16*>(src), static_cast<float*>(acc), n);
  else
    std::memcpy(acc, src, static_cast<size_t>(n) * dtype_size(dtype));
}

void add_to_accumulator(void* acc_v, const void* src_v, DType dtype, int64_t n) {
  if (n == 0) return;  // empty buffers may be null, which memcpy must not get
  switch (dtype) {
    case DType::f32: {  // plain loop: GCC emits 8-wide vaddps at -O3 -march=x86-64-v3
      float* acc = static_cast<float*>(acc_v);
      const float* src = static_cast<const float*>(src_v);
      for (int64_t i = 0; i < n; ++i) acc[i] += src[i];
      return;
    }
    case DType::bf16: {
      float* acc = static_cast<float*>(acc_v);
      const bfloat16* src = static_cast<const bfloat16*>(src_v);
      int64_t i = 0;
      for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), load8_bf16(src + i)));
        _mm256_storeu_ps(acc + i + 8,
                         _mm256_add_ps(_mm256_loadu_ps(acc + i + 8), load8_bf16(src + i + 8)));
      }
      for (; i < n; ++i) acc[i] += acc::kernels::to_f32(src[i]);
      return;
    }
    case DType::i32:
      add_wrapping<int32_t, uint32_t>(static_cast<int32_t*>(acc_v),
                                      static_cast<const int32_t*>(src_v), n);
      return;
    case DType::i64:
      add_wrapping<int64_t, uint64_t>(static_cast<int64_t*>(acc_v),
                                      static_cast<const int64_t*>(src_v), n);
      return;
  }
}

void sum_to_accumulator(void* acc_v, const void* a_v, const void* b_v, DType dtype, int64_t n) {
  if (n == 0) return;  // empty buffers may be null, which memcpy must not get
  switch (dtype) {
    case DType::f32: {
      float* acc = static_cast<float*>(acc_v);
      const float* a = static_cast<const float*>(a_v);
      const float* b = static_cast<const float*>(b_v);
      for (int64_t i = 0; i < n; ++i) acc[i] = a[i] + b[i];
      return;
    }
    case DType::bf16: {
      float* acc = static_cast<float*>(acc_v);
      const bfloat16* a = static_cast<const bfloat16*>(a_v);
      const bfloat16* b = static_cast<const bfloat16*>(b_v);
      int64_t i = 0;
      for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(acc + i, _mm256_add_ps(load8_bf16(a + i), load8_bf16(b + i)));
      for (; i < n; ++i) acc[i] = acc::kernels::to_f32(a[i]) + acc::kernels::to_f32(b[i]);
      return;
    }
    case DType::i32:
    case DType::i64:  // integers: copy then add, the wrapping add is already a plain loop
      if (acc_v != a_v) std::memmove(acc_v, a_v, static_cast<size_t>(n) * dtype_size(dtype));
      add_to_accumulator(acc_v, b_v, dtype, n);
      return;
  }
}

void store_accumulator(void* acc_v, void* dst, DType dtype, int64_t n, float scale) {
  if (n == 0) return;  // empty buffers may be null, which memcpy must not get
  check_scale(dtype, scale);
  if (is_floating(dtype) && scale != 1.f) {
    float* acc = static_cast<float*>(acc_v);
    for (int64_t i = 0; i < n; ++i) acc[i] *= scale;
  }
  if (dtype == DType::bf16)
    acc::kernels::f32_to_bf16(static_cast<const float*>(acc_v), static_cast<bfloat16*>(dst), n);
  else if (acc_v != dst)
    std::memcpy(dst, acc_v, static_cast<size_t>(n) * dtype_size(dtype));
}

namespace ref {

void load_accumulator(void* acc, const void* src, DType dtype, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::f32: static_cast<float*>(acc)[i] = static_cast<const float*>(src)[i]; break;
      case DType::bf16:
        static_cast<float*>(acc)[i] = acc::kernels::to_f32(static_cast<const bfloat16*>(src)[i]);
        break;
      case DType::i32: static_cast<int32_t*>(acc)[i] = static_cast<const int32_t*>(src)[i]; break;
      case DType::i64: static_cast<int64_t*>(acc)[i] = static_cast<const int64_t*>(src)[i]; break;
    }
  }
}

void add_to_accumulator(void* acc, const void* src, DType dtype, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::f32: static_cast<float*>(acc)[i] += static_cast<const float*>(src)[i]; break;
      case DType::bf16:
        static_cast<float*>(acc)[i] += acc::kernels::to_f32(static_cast<const bfloat16*>(src)[i]);
        break;
      case DType::i32: {
        auto* a = static_cast<int32_t*>(acc) + i;
        *a = static_cast<int32_t>(static_cast<uint32_t>(*a) +
                                  static_cast<uint32_t>(static_cast<const int32_t*>(src)[i]));
        break;
      }
      case DType::i64: {
        auto* a = static_cast<int64_t*>(acc) + i;
        *a = static_cast<int64_t>(static_cast<uint64_t>(*a) +
                                  static_cast<uint64_t>(static_cast<const int64_t*>(src)[i]));
        break;
      }
    }
  }
}

void sum_to_accumulator(void* acc, const void* a, const void* b, DType dtype, int64_t n) {
  load_accumulator(acc, a, dtype, n);
  add_to_accumulator(acc, b, dtype, n);
}

void store_accumulator(void* acc, void* dst, DType dtype, int64_t n, float scale) {
  check_scale(dtype, scale);
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::f32:
        static_cast<float*>(dst)[i] = static_cast<const float*>(acc)[i] * scale;
        break;
      case DType::bf16:
        static_cast<bfloat16*>(dst)[i] =
            acc::kernels::to_bf16(static_cast<const float*>(acc)[i] * scale);
        break;
      case DType::i32: static_cast<int32_t*>(dst)[i] = static_cast<const int32_t*>(acc)[i]; break;
      case DType::i64: static_cast<int64_t*>(dst)[i] = static_cast<const int64_t*>(acc)[i]; break;
    }
  }
}

}  // namespace ref
}  // namespace acc::dist::kernels
