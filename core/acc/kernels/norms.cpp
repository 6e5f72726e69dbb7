#include "acc/kernels/norms.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "acc/kernels/detail/avx2_math.h"
#include "acc/kernels/detail/parallel.h"
#include "acc/util/error.h"

// Layer norm and RMS norm share one row kernel each way: RMS norm is layer norm with the mean
// fixed at 0 and no beta (the `center` flag).
namespace acc::kernels {
namespace {

using detail::hsum;

// dgamma/dbeta are summed per block of rows, then the block partials in block order. The blocking
// depends only on the shape, never on the threads, so results are reproducible. At most
// kMaxRowBlocks partial rows bound the scratch memory; at least kMinRowsPerBlock rows amortise it.
constexpr int64_t kMaxRowBlocks = 64, kMinRowsPerBlock = 32;

int64_t rows_per_block(int64_t rows) {
  return std::max(kMinRowsPerBlock, (rows + kMaxRowBlocks - 1) / kMaxRowBlocks);
}

void check_shape(const char* op, int64_t rows, int64_t cols) {
  ACC_CHECK(rows >= 0 && cols > 0, op, ": expected rows >= 0 and cols > 0, got rows=", rows,
            " cols=", cols);
}

float sum(const float* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(x + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(x + i + 8));
  }
  float s = hsum(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) s += x[i];
  return s;
}

// sum_i (x_i - c)^2
float sum_sq_dev(const float* x, float c, int64_t n) {
  const __m256 vc = _mm256_set1_ps(c);
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x + i), vc);
    const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vc);
    a0 = _mm256_fmadd_ps(d0, d0, a0);
    a1 = _mm256_fmadd_ps(d1, d1, a1);
  }
  float s = hsum(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) s += (x[i] - c) * (x[i] - c);
  return s;
}

void norm_row_fwd(const float* x, const float* gamma, const float* beta, float* y, float mean,
                  float rstd, int64_t n) {
  const __m256 vm = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd), one = _mm256_set1_ps(1.f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vr);
    const __m256 g = gamma ? _mm256_loadu_ps(gamma + i) : one;
    const __m256 b = beta ? _mm256_loadu_ps(beta + i) : _mm256_setzero_ps();
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(xh, g, b));
  }
  for (; i < n; ++i) y[i] = (x[i] - mean) * rstd * (gamma ? gamma[i] : 1.f) + (beta ? beta[i] : 0.f);
}

void norm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* mean_out,
              float* rstd_out, int64_t rows, int64_t cols, float eps, bool center) {
  detail::parallel_ranges(rows, detail::rows_grain(cols), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * cols;
      const float mean = center ? sum(xr, cols) / static_cast<float>(cols) : 0.f;
      const float rstd = 1.f / std::sqrt(sum_sq_dev(xr, mean, cols) / static_cast<float>(cols) + eps);
      if (mean_out) mean_out[r] = mean;
      rstd_out[r] = rstd;
      norm_row_fwd(xr, gamma, beta, y + r * cols, mean, rstd, cols);
    }
  });
}

// One row of backward. With g = dy*gamma and xhat = (x-mean)*rstd:
//   dx = rstd * (g - mean(g) - xhat * mean(g*xhat))   (the mean(g) term only when centred)
// and dy*xhat, dy are added into the row block's dgamma/dbeta partials.
void norm_row_bwd(const float* dy, const float* x, const float* gamma, float mean, float rstd,
                  float* dx, float* pgamma, float* pbeta, int64_t n, bool center) {
  const __m256 vm = _mm256_set1_ps(mean), vr = _mm256_set1_ps(rstd), one = _mm256_set1_ps(1.f);
  __m256 ag = _mm256_setzero_ps(), agx = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 d = _mm256_loadu_ps(dy + i);
    const __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vr);
    const __m256 g = _mm256_mul_ps(d, gamma ? _mm256_loadu_ps(gamma + i) : one);
    ag = _mm256_add_ps(ag, g);
    agx = _mm256_fmadd_ps(g, xh, agx);
    if (pgamma) _mm256_storeu_ps(pgamma + i, _mm256_fmadd_ps(d, xh, _mm256_loadu_ps(pgamma + i)));
    if (pbeta) _mm256_storeu_ps(pbeta + i, _mm256_add_ps(d, _mm256_loadu_ps(pbeta + i)));
  }
  float sg = hsum(ag), sgx = hsum(agx);
  for (int64_t j = i; j < n; ++j) {
    const float xh = (x[j] - mean) * rstd, g = dy[j] * (gamma ? gamma[j] : 1.f);
    sg += g;
    sgx += g * xh;
    if (pgamma) pgamma[j] += dy[j] * xh;
    if (pbeta) pbeta[j] += dy[j];
  }
  const float inv_n = 1.f / static_cast<float>(n);
  const float a = center ? sg * inv_n : 0.f, b = sgx * inv_n;
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), vr);
    const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(dy + i), gamma ? _mm256_loadu_ps(gamma + i) : one);
    const __m256 t = _mm256_sub_ps(_mm256_sub_ps(g, va), _mm256_mul_ps(xh, vb));
    _mm256_storeu_ps(dx + i, _mm256_mul_ps(vr, t));
  }
  for (; i < n; ++i) {
    const float xh = (x[i] - mean) * rstd, g = dy[i] * (gamma ? gamma[i] : 1.f);
    dx[i] = rstd * (g - a - xh * b);
  }
}

void norm_bwd(const float* dy, const float* x, const float* gamma, const float* mean,
              const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows, int64_t cols,
              bool center) {
  const int64_t per_block = rows_per_block(rows), blocks = (rows + per_block - 1) / per_block;
  // Per-block partials: [blocks, cols] for each requested parameter gradient.
  std::vector<float> pgamma(dgamma ? static_cast<size_t>(blocks * cols) : 0, 0.f);
  std::vector<float> pbeta(dbeta ? static_cast<size_t>(blocks * cols) : 0, 0.f);
  const int64_t block_grain = std::max<int64_t>(1, detail::rows_grain(cols) / per_block);
  detail::parallel_ranges(blocks, block_grain, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      float* pg = dgamma ? pgamma.data() + b * cols : nullptr;
      float* pb = dbeta ? pbeta.data() + b * cols : nullptr;
      for (int64_t r = b * per_block; r < std::min(rows, (b + 1) * per_block); ++r)
        norm_row_bwd(dy + r * cols, x + r * cols, gamma, center ? mean[r] : 0.f, rstd[r],
                     dx + r * cols, pg, pb, cols, center);
    }
  });
  // Fixed-order reduction of the partials, parallel over columns.
  detail::parallel_ranges(cols, detail::kElemsPerTask / std::max<int64_t>(1, blocks), [&](int64_t c0, int64_t c1) {
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t c = c0; c < c1; ++c) {
        if (dgamma) dgamma[c] += pgamma[static_cast<size_t>(b * cols + c)];
        if (dbeta) dbeta[c] += pbeta[static_cast<size_t>(b * cols + c)];
      }
  });
}

}  // namespace

void layernorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                   float* rstd, int64_t rows, int64_t cols, float eps) {
  check_shape("layernorm_fwd", rows, cols);
  ACC_CHECK(mean && rstd, "layernorm_fwd: mean and rstd outputs ([rows]) must not be null");
  norm_fwd(x, gamma, beta, y, mean, rstd, rows, cols, eps, true);
}

void layernorm_bwd(const float* dy, const float* x, const float* gamma, const float* mean,
                   const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                   int64_t cols) {
  check_shape("layernorm_bwd", rows, cols);
  norm_bwd(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, rows, cols, true);
}

void rmsnorm_fwd(const float* x, const float* gamma, float* y, float* rstd, int64_t rows,
                 int64_t cols, float eps) {
  check_shape("rmsnorm_fwd", rows, cols);
  ACC_CHECK(rstd, "rmsnorm_fwd: the rstd output ([rows]) must not be null");
  norm_fwd(x, gamma, nullptr, y, nullptr, rstd, rows, cols, eps, false);
}

void rmsnorm_bwd(const float* dy, const float* x, const float* gamma, const float* rstd, float* dx,
                 float* dgamma, int64_t rows, int64_t cols) {
  check_shape("rmsnorm_bwd", rows, cols);
  norm_bwd(dy, x, gamma, nullptr, rstd, dx, dgamma, nullptr, rows, cols, false);
}

// References: plain loops in double, one row at a time.
namespace ref {
namespace {

void norm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* mean_out,
              float* rstd_out, int64_t rows, int64_t cols, float eps, bool center) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    double mean = 0, var = 0;
    if (center) {
      for (int64_t c = 0; c < cols; ++c) mean += xr[c];
      mean /= static_cast<double>(cols);
    }
    for (int64_t c = 0; c < cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    const double rstd = 1.0 / std::sqrt(var / static_cast<double>(cols) + eps);
    if (mean_out) mean_out[r] = static_cast<float>(mean);
    rstd_out[r] = static_cast<float>(rstd);
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = static_cast<float>((xr[c] - mean) * rstd * (gamma ? gamma[c] : 1.f) +
                                           (beta ? beta[c] : 0.f));
  }
}

void norm_bwd(const float* dy, const float* x, const float* gamma, const float* mean_in,
              const float* rstd_in, float* dx, float* dgamma, float* dbeta, int64_t rows,
              int64_t cols, bool center) {
  std::vector<double> dg(static_cast<size_t>(cols), 0.0), db(static_cast<size_t>(cols), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    const float* dyr = dy + r * cols;
    const double mean = center ? mean_in[r] : 0.0, rstd = rstd_in[r];
    double sg = 0, sgx = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double xh = (xr[c] - mean) * rstd, g = static_cast<double>(dyr[c]) * (gamma ? gamma[c] : 1.f);
      sg += g;
      sgx += g * xh;
      dg[static_cast<size_t>(c)] += dyr[c] * xh;
      db[static_cast<size_t>(c)] += dyr[c];
    }
    const double a = center ? sg / static_cast<double>(cols) : 0.0, b = sgx / static_cast<double>(cols);
    for (int64_t c = 0; c < cols; ++c) {
      const double xh = (xr[c] - mean) * rstd, g = static_cast<double>(dyr[c]) * (gamma ? gamma[c] : 1.f);
      dx[r * cols + c] = static_cast<float>(rstd * (g - a - xh * b));
    }
  }
  for (int64_t c = 0; c < cols; ++c) {
    if (dgamma) dgamma[c] += static_cast<float>(dg[static_cast<size_t>(c)]);
    if (dbeta) dbeta[c] += static_cast<float>(db[static_cast<size_t>(c)]);
  }
}

}  // namespace

void layernorm_fwd(const float* x, const float* gamma, const float* beta, float* y, float* mean,
                   float* rstd, int64_t rows, int64_t cols, float eps) {
  norm_fwd(x, gamma, beta, y, mean, rstd, rows, cols, eps, true);
}
void layernorm_bwd(const float* dy, const float* x, const float* gamma, const float* mean,
                   const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                   int64_t cols) {
  norm_bwd(dy, x, gamma, mean, rstd, dx, dgamma, dbeta, rows, cols, true);
}
void rmsnorm_fwd(const float* x, const float* gamma, float* y, float* rstd, int64_t rows,
                 int64_t cols, float eps) {
  norm_fwd(x, gamma, nullptr, y, nullptr, rstd, rows, cols, eps, false);
}
void rmsnorm_bwd(const float* dy, const float* x, const float* gamma, const float* rstd, float* dx,
                 float* dgamma, int64_t rows, int64_t cols) {
  norm_bwd(dy, x, gamma, nullptr, rstd, dx, dgamma, nullptr, rows, cols, false);
}
}  // namespace ref

}  // namespace acc::kernels
