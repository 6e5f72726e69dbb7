#include "acc/kernels/softmax.h"

#include <immintrin.h>

#include <cmath>
#include <limits>
#include <vector>

#include "acc/kernels/detail/avx2_math.h"
#include "acc/kernels/detail/parallel.h"
#include "acc/util/error.h"

namespace acc::kernels {
namespace {

using detail::Lanes;

void check_shape(const char* op, int64_t rows, int64_t cols) {
  ACC_CHECK(rows >= 0 && cols > 0, op, ": expected rows >= 0 and cols > 0, got rows=", rows,
            " cols=", cols);
}

void softmax_row(const float* x, float* y, int64_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 vmax = neg_inf;
  detail::for_each_lanes(n, [&](int64_t i, const Lanes& l) {
    vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(neg_inf, l.load(x + i), _mm256_castsi256_ps(l.mask)));
  });
  const __m256 m = _mm256_set1_ps(detail::hmax(vmax));
  __m256 vsum = _mm256_setzero_ps();
  detail::for_each_lanes(n, [&](int64_t i, const Lanes& l) {
    const __m256 e = detail::exp256(_mm256_sub_ps(l.load(x + i), m));
    l.store(y + i, e);
    vsum = _mm256_add_ps(vsum, _mm256_and_ps(e, _mm256_castsi256_ps(l.mask)));
  });
  const __m256 inv = _mm256_set1_ps(1.f / detail::hsum(vsum));
  detail::for_each_lanes(n, [&](int64_t i, const Lanes& l) { l.store(y + i, _mm256_mul_ps(l.load(y + i), inv)); });
}

// dx = y * (dy - sum(dy * y)); masked-off lanes load as 0 and add nothing to the dot product.
void softmax_row_bwd(const float* dy, const float* y, float* dx, int64_t n) {
  __m256 vdot = _mm256_setzero_ps();
  detail::for_each_lanes(n, [&](int64_t i, const Lanes& l) {
    vdot = _mm256_fmadd_ps(l.load(dy + i), l.load(y + i), vdot);
  });
  const __m256 dot = _mm256_set1_ps(detail::hsum(vdot));
  detail::for_each_lanes(n, [&](int64_t i, const Lanes& l) {
    l.store(dx + i, _mm256_mul_ps(l.load(y + i), _mm256_sub_ps(l.load(dy + i), dot)));
  });
}

}  // namespace

void softmax_fwd(const float* x, float* y, int64_t rows, int64_t cols) {
  check_shape("softmax_fwd", rows, cols);
  detail::parallel_ranges(rows, detail::rows_grain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) softmax_row(x + r * cols, y + r * cols, cols);
  });
}

void softmax_bwd(const float* dy, const float* y, float* dx, int64_t rows, int64_t cols) {
  check_shape("softmax_bwd", rows, cols);
  detail::parallel_ranges(rows, detail::rows_grain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) softmax_row_bwd(dy + r * cols, y + r * cols, dx + r * cols, cols);
  });
}

// References: max-subtracted softmax in double.
namespace ref {
void softmax_fwd(const float* x, float* y, int64_t rows, int64_t cols) {
  std::vector<double> e(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double m = xr[0], s = 0;
    for (int64_t c = 1; c < cols; ++c) m = std::max(m, static_cast<double>(xr[c]));
    for (int64_t c = 0; c < cols; ++c) s += e[static_cast<size_t>(c)] = std::exp(xr[c] - m);
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = static_cast<float>(e[static_cast<size_t>(c)] / s);
  }
}
void softmax_bwd(const float* dy, const float* y, float* dx, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r * cols;
    double dot = 0;
    for (int64_t c = 0; c < cols; ++c) dot += static_cast<double>(dy[o + c]) * y[o + c];
    for (int64_t c = 0; c < cols; ++c) dx[o + c] = static_cast<float>(y[o + c] * (dy[o + c] - dot));
  }
}
}  // namespace ref

}  // namespace acc::kernels
