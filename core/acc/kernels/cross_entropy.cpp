#include "acc/kernels/cross_entropy.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "acc/kernels/detail/avx2_math.h"
#include "acc/kernels/detail/parallel.h"
#include "acc/util/error.h"

namespace acc::kernels {
namespace {

using detail::for_each_lanes;
using detail::Lanes;

float row_max(const float* x, int64_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  __m256 mx = neg_inf;
  for_each_lanes(n, [&](int64_t j, const Lanes& lanes) {
    const __m256 v = lanes.load(x + j);
    mx = _mm256_max_ps(
        mx, lanes.full ? v : _mm256_blendv_ps(neg_inf, v, _mm256_castsi256_ps(lanes.mask)));
  });
  return detail::hmax(mx);
}

// log(sum(exp(x))) with the max subtracted first so large logits cannot overflow.
float row_lse(const float* x, int64_t n) {
  const float mx = row_max(x, n);
  __m256 sum = _mm256_setzero_ps();
  for_each_lanes(n, [&](int64_t j, const Lanes& lanes) {
    __m256 e = detail::exp256(_mm256_sub_ps(lanes.load(x + j), _mm256_set1_ps(mx)));
    if (!lanes.full) e = _mm256_and_ps(e, _mm256_castsi256_ps(lanes.mask));
    sum = _mm256_add_ps(sum, e);
  });
  return mx + std::log(detail::hsum(sum));
}

// Validated up front (serially, N ints) so a bad target is reported before any work is done.
int64_t count_and_check_targets(const char* op, const int32_t* targets, int64_t N, int64_t V,
                                int32_t ignore_index) {
  ACC_CHECK(N >= 0 && V >= 1, op, ": expected N >= 0 rows and V >= 1 classes, got N=", N, " V=", V);
  int64_t kept = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (targets[i] == ignore_index) continue;
    ACC_CHECK(targets[i] >= 0 && targets[i] < V, op, ": target of row ", i, " is ", targets[i],
              "; expected a class in [0, ", V, ") or ignore_index ", ignore_index);
    ++kept;
  }
  return kept;
}

}  // namespace

int64_t cross_entropy_fwd(const float* logits, const int32_t* targets, float* losses, float* lse,
                          int64_t N, int64_t V, int32_t ignore_index) {
  const int64_t kept = count_and_check_targets("cross_entropy_fwd", targets, N, V, ignore_index);
  detail::parallel_ranges(N, detail::rows_grain(V), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* row = logits + i * V;
      lse[i] = row_lse(row, V);
      losses[i] = targets[i] == ignore_index ? 0.f : lse[i] - row[targets[i]];
    }
  });
  return kept;
}

void cross_entropy_bwd(const float* logits, const int32_t* targets, const float* lse,
                       const float* dloss, float* dlogits, int64_t N, int64_t V,
                       int32_t ignore_index) {
  count_and_check_targets("cross_entropy_bwd", targets, N, V, ignore_index);
  detail::parallel_ranges(N, detail::rows_grain(V), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      // Element-wise read-then-write of the same index, so dlogits may alias logits.
      const float* x = logits + i * V;
      float* dx = dlogits + i * V;
      if (targets[i] == ignore_index) {
        std::fill(dx, dx + V, 0.f);
        continue;
      }
      const __m256 g = _mm256_set1_ps(dloss[i]), shift = _mm256_set1_ps(lse[i]);
      for_each_lanes(V, [&](int64_t j, const Lanes& lanes) {
        lanes.store(dx + j,
                    _mm256_mul_ps(g, detail::exp256(_mm256_sub_ps(lanes.load(x + j), shift))));
      });
      dx[targets[i]] -= dloss[i];
    }
  });
}

}  // namespace acc::kernels
