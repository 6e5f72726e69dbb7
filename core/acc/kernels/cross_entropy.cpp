#include "acc/kernels/cross_entropy.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "acc/kernels/convert.h"
#include "acc/kernels/detail/avx2_math.h"
#include "acc/kernels/detail/avx512_math.h"
#include "acc/kernels/detail/isa.h"
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

// log(sum(exp(x))) with the max subtracted first so large logits cannot overflow. A row of a
// large vocabulary (201 KB at 50257) stays in L2 between the two passes; the exp dominates.
float row_lse_avx2(const float* x, int64_t n) {
  const float mx = row_max(x, n);
  __m256 sum = _mm256_setzero_ps();
  for_each_lanes(n, [&](int64_t j, const Lanes& lanes) {
    __m256 e = detail::exp256(_mm256_sub_ps(lanes.load(x + j), _mm256_set1_ps(mx)));
    if (!lanes.full) e = _mm256_and_ps(e, _mm256_castsi256_ps(lanes.mask));
    sum = _mm256_add_ps(sum, e);
  });
  return mx + std::log(detail::hsum(sum));
}

// dx = g * exp(x - lse): the softmax times the upstream gradient.
void row_grad_avx2(const float* x, float* dx, int64_t n, float g, float lse) {
  const __m256 vg = _mm256_set1_ps(g), shift = _mm256_set1_ps(lse);
  for_each_lanes(n, [&](int64_t j, const Lanes& lanes) {
    lanes.store(dx + j, _mm256_mul_ps(vg, detail::exp256(_mm256_sub_ps(lanes.load(x + j), shift))));
  });
}

// The same two on 16 lanes, for CPUs with AVX-512F (twice the exp throughput). GCC 12's
// avx512fintrin.h passes _mm512_undefined_* as pass-through operands (in the reductions), which
// its uninitialised-value warnings misreport here; they are silenced for these two only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f"))) float row_lse_avx512(const float* x, int64_t n) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __mmask16 tail = detail::tail_mask16(n % 16);
  const int64_t body = n - n % 16;
  __m512 mx = neg_inf;
  for (int64_t j = 0; j < body; j += 16) mx = _mm512_max_ps(mx, _mm512_loadu_ps(x + j));
  if (tail) mx = _mm512_max_ps(mx, _mm512_mask_loadu_ps(neg_inf, tail, x + body));
  const float m = _mm512_reduce_max_ps(mx);
  const __m512 vm = _mm512_set1_ps(m);
  __m512 sum = _mm512_setzero_ps();
  for (int64_t j = 0; j < body; j += 16)
    sum = _mm512_add_ps(sum, detail::exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j), vm)));
  if (tail) {
    const __m512 e = detail::exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, x + body), vm));
    sum = _mm512_mask_add_ps(sum, tail, sum, e);
  }
  return m + std::log(_mm512_reduce_add_ps(sum));
}

__attribute__((target("avx512f"))) void row_grad_avx512(const float* x, float* dx, int64_t n, float g,
                                                         float lse) {
  const __m512 vg = _mm512_set1_ps(g), shift = _mm512_set1_ps(lse);
  const __mmask16 tail = detail::tail_mask16(n % 16);
  const int64_t body = n - n % 16;
  for (int64_t j = 0; j < body; j += 16)
    _mm512_storeu_ps(dx + j, _mm512_mul_ps(vg, detail::exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j), shift))));
  if (tail) {
    const __m512 v = _mm512_maskz_loadu_ps(tail, x + body);
    _mm512_mask_storeu_ps(dx + body, tail, _mm512_mul_ps(vg, detail::exp512(_mm512_sub_ps(v, shift))));
  }
}
#pragma GCC diagnostic pop

using RowGrad = void (*)(const float* x, float* dx, int64_t n, float g, float lse);

// dx = dloss * (softmax(x) - onehot(target)) over n elements of a row (all or a piece of it);
// target < 0: the target is not among them.
void dlogits_piece(RowGrad row_grad, const float* x, float* dx, int64_t n, int64_t target,
                   float dloss, float lse) {
  row_grad(x, dx, n, dloss, lse);
  if (target >= 0) dx[target] -= dloss;
}

}  // namespace

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

int64_t cross_entropy_fwd(const float* logits, const int32_t* targets, float* losses, float* lse,
                          int64_t N, int64_t V, int32_t ignore_index) {
  const int64_t kept = count_and_check_targets("cross_entropy_fwd", targets, N, V, ignore_index);
  const auto row_lse = detail::use_avx512() ? row_lse_avx512 : row_lse_avx2;
  detail::parallel_ranges(N, detail::rows_grain(V), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float* row = logits + i * V;
      lse[i] = row_lse(row, V);
      losses[i] = targets[i] == ignore_index ? 0.f : lse[i] - row[targets[i]];
    }
  });
  return kept;
}

void logsumexp_rows(const float* logits, float* lse, int64_t N, int64_t V) {
  if (V == 0) {
    std::fill(lse, lse + N, -std::numeric_limits<float>::infinity());
    return;
  }
  const auto row_lse = detail::use_avx512() ? row_lse_avx512 : row_lse_avx2;
  detail::parallel_ranges(N, detail::rows_grain(V), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) lse[i] = row_lse(logits + i * V, V);
  });
}

namespace {

// The gradient of rows whose logits are columns [first, first + V) of the whole row: a
// target outside them gets no one-hot term; an ignored row is zero. f32 is written in place
// (dlogits may alias logits); bf16 is made in f32 a piece at a time in an L1-sized buffer, then
// rounded: the same element-wise arithmetic, so the same bits as rounding the f32 gradient.
template <class Out>
void backward_rows(const float* logits, const int32_t* targets, int64_t first, const float* lse,
                   const float* dloss, Out* dlogits, int64_t N, int64_t V, int32_t ignore_index) {
  const RowGrad row_grad = detail::use_avx512() ? row_grad_avx512 : row_grad_avx2;
  constexpr int64_t kPiece = std::is_same_v<Out, float> ? std::numeric_limits<int64_t>::max() : 512;
  detail::parallel_ranges(N, detail::rows_grain(std::max<int64_t>(V, 1)), [&](int64_t begin, int64_t end) {
    alignas(64) float buffer[std::is_same_v<Out, float> ? 1 : kPiece];
    for (int64_t i = begin; i < end; ++i) {
      const bool ignored = targets[i] == ignore_index;
      const int64_t target = targets[i] - first;  // in this row's columns when in [0, V)
      for (int64_t j = 0; j < V; j += kPiece) {
        const int64_t n = std::min(kPiece, V - j);
        float* piece = nullptr;
        if constexpr (std::is_same_v<Out, float>)
          piece = dlogits + i * V + j;
        else
          piece = buffer;
        if (ignored)
          std::fill(piece, piece + n, 0.f);
        else
          dlogits_piece(row_grad, logits + i * V + j, piece, n,
                        target >= j && target < j + n ? target - j : -1, dloss[i], lse[i]);
        if constexpr (!std::is_same_v<Out, float>) f32_to_bf16(piece, dlogits + i * V + j, n);
      }
    }
  });
}

}  // namespace

void cross_entropy_bwd(const float* logits, const int32_t* targets, const float* lse,
                       const float* dloss, float* dlogits, int64_t N, int64_t V,
                       int32_t ignore_index) {
  count_and_check_targets("cross_entropy_bwd", targets, N, V, ignore_index);
  backward_rows(logits, targets, 0, lse, dloss, dlogits, N, V, ignore_index);
}

void cross_entropy_bwd(const float* logits, const int32_t* targets, const float* lse,
                       const float* dloss, bfloat16* dlogits, int64_t N, int64_t V,
                       int32_t ignore_index) {
  count_and_check_targets("cross_entropy_bwd", targets, N, V, ignore_index);
  backward_rows(logits, targets, 0, lse, dloss, dlogits, N, V, ignore_index);
}

void cross_entropy_bwd_columns(const float* logits, const int32_t* targets, int64_t first,
                               const float* lse, const float* dloss, float* dlogits, int64_t N,
                               int64_t V, int32_t ignore_index) {
  backward_rows(logits, targets, first, lse, dloss, dlogits, N, V, ignore_index);
}

void cross_entropy_bwd_columns(const float* logits, const int32_t* targets, int64_t first,
                               const float* lse, const float* dloss, bfloat16* dlogits, int64_t N,
                               int64_t V, int32_t ignore_index) {
  backward_rows(logits, targets, first, lse, dloss, dlogits, N, V, ignore_index);
}

}  // namespace acc::kernels
