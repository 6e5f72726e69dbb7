#pragma once
// f32 <-> bf16 conversion. f32 -> bf16 rounds to nearest, ties to even; NaN stays NaN (quiet).
#include <cstdint>
#include <cstring>

#include "acc/tensor/dtype.h"

namespace acc::kernels {

inline bfloat16 to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bfloat16{static_cast<uint16_t>((u >> 16) | 0x40u)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return bfloat16{static_cast<uint16_t>(u >> 16)};
}

inline float to_f32(bfloat16 b) {
  const uint32_t u = static_cast<uint32_t>(b.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Vectorised (AVX-512 when the CPU has it, AVX2 otherwise) and parallel over large n.
void f32_to_bf16(const float* src, bfloat16* dst, int64_t n);
void bf16_to_f32(const bfloat16* src, float* dst, int64_t n);

namespace ref {
void f32_to_bf16(const float* src, bfloat16* dst, int64_t n);
void bf16_to_f32(const bfloat16* src, float* dst, int64_t n);
}  // namespace ref

}  // namespace acc::kernels
