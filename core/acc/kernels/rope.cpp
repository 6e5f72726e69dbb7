#include "acc/kernels/rope.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "acc/kernels/detail/avx2_math.h"
#include "acc/kernels/detail/parallel.h"
#include "acc/util/error.h"

namespace acc::kernels {
namespace {

using detail::Lanes;

void check_shape(const char* op, const RopeShape& s) {
  ACC_CHECK(s.B >= 0 && s.H >= 0 && s.T >= 0 && s.D > 0 && s.D % 2 == 0 && s.pos_offset >= 0 &&
                s.theta > 0.f,
            op, ": expected B, H, T >= 0, an even D > 0, pos_offset >= 0 and theta > 0, got B=", s.B,
            " H=", s.H, " T=", s.T, " D=", s.D, " pos_offset=", s.pos_offset, " theta=", s.theta);
}

// inv_freq_j = theta^(-2j/D) in double, so the f32 cos/sin tables are correctly rounded; shared
// by the fast kernel and the reference.
double inv_freq(const RopeShape& s, int64_t j) {
  return std::pow(static_cast<double>(s.theta), -2.0 * static_cast<double>(j) / static_cast<double>(s.D));
}

// Rotates every [D] row by +angle (forward) or -angle (backward, the inverse rotation).
// Each pair is loaded before it is stored, so in == out is safe.
void rope_apply(const float* in, float* out, const RopeShape& s, float sign) {
  const int64_t half = s.D / 2, rows = s.B * s.H * s.T;
  if (rows == 0) return;
  std::vector<double> freq(static_cast<size_t>(half));
  for (int64_t j = 0; j < half; ++j) freq[static_cast<size_t>(j)] = inv_freq(s, j);
  // cos/sin once per (t, j), shared by all B*H rows at that position.
  std::vector<float> cos_t(static_cast<size_t>(s.T * half)), sin_t(cos_t.size());
  detail::parallel_ranges(s.T, std::max<int64_t>(1, 4096 / half), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t)
      for (int64_t j = 0; j < half; ++j) {
        const double a = static_cast<double>(t + s.pos_offset) * freq[static_cast<size_t>(j)];
        cos_t[static_cast<size_t>(t * half + j)] = static_cast<float>(std::cos(a));
        sin_t[static_cast<size_t>(t * half + j)] = sign * static_cast<float>(std::sin(a));
      }
  });
  detail::parallel_ranges(rows, detail::rows_grain(s.D), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* c = cos_t.data() + (r % s.T) * half;
      const float* sn = sin_t.data() + (r % s.T) * half;
      const float* x = in + r * s.D;
      float* y = out + r * s.D;
      detail::for_each_lanes(half, [&](int64_t j, const Lanes& l) {
        const __m256 x1 = l.load(x + j), x2 = l.load(x + half + j);
        const __m256 vc = l.load(c + j), vs = l.load(sn + j);
        l.store(y + j, _mm256_fnmadd_ps(x2, vs, _mm256_mul_ps(x1, vc)));
        l.store(y + half + j, _mm256_fmadd_ps(x1, vs, _mm256_mul_ps(x2, vc)));
      });
    }
  });
}

}  // namespace

void rope_fwd(const float* x, float* y, const RopeShape& s) {
  check_shape("rope_fwd", s);
  rope_apply(x, y, s, 1.f);
}

void rope_bwd(const float* dy, float* dx, const RopeShape& s) {
  check_shape("rope_bwd", s);
  rope_apply(dy, dx, s, -1.f);
}

// References: the formula of rope.h element by element, angles evaluated per element in double.
namespace ref {
namespace {
void rotate(const float* in, float* out, const RopeShape& s, double sign) {
  const int64_t half = s.D / 2;
  for (int64_t r = 0; r < s.B * s.H * s.T; ++r)
    for (int64_t j = 0; j < half; ++j) {
      const double a = static_cast<double>(r % s.T + s.pos_offset) * inv_freq(s, j);
      const double c = std::cos(a), sn = sign * std::sin(a);
      const double x1 = in[r * s.D + j], x2 = in[r * s.D + half + j];
      out[r * s.D + j] = static_cast<float>(x1 * c - x2 * sn);
      out[r * s.D + half + j] = static_cast<float>(x2 * c + x1 * sn);
    }
}
}  // namespace
void rope_fwd(const float* x, float* y, const RopeShape& s) { rotate(x, y, s, 1.0); }
void rope_bwd(const float* dy, float* dx, const RopeShape& s) { rotate(dy, dx, s, -1.0); }
}  // namespace ref

}  // namespace acc::kernels
