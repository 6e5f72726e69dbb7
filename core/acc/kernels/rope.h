#pragma once
// Rotary position embedding in the Hugging Face Llama convention ("rotate_half": dimension j is
// paired with j + D/2), applied to x [B, H, T, D] f32 at positions 0..T-1 (plus pos_offset):
//   inv_freq_j = theta^(-2j/D), angle = pos * inv_freq_j
//   y[j]       = x[j] cos - x[j+D/2] sin,  y[j+D/2] = x[j+D/2] cos + x[j] sin
// Backward is the inverse rotation applied to dy. x and y may alias (in place).
#include <cstdint>

namespace acc::kernels {

struct RopeShape {
  int64_t B = 0, H = 0, T = 0, D = 0;  // D even
  float theta = 10000.f;
  int64_t pos_offset = 0;
};

void rope_fwd(const float* x, float* y, const RopeShape& s);
void rope_bwd(const float* dy, float* dx, const RopeShape& s);

namespace ref {
void rope_fwd(const float* x, float* y, const RopeShape& s);
void rope_bwd(const float* dy, float* dx, const RopeShape& s);
}  // namespace ref

}  // namespace acc::kernels
