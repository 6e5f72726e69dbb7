// Reference cross-entropy: one row at a time in double, for tests.
#include <algorithm>
#include <cmath>

#include "acc/kernels/cross_entropy.h"
#include "acc/util/error.h"

namespace acc::kernels::ref {
namespace {

double row_lse(const float* x, int64_t V) {
  const double mx = *std::max_element(x, x + V);
  double sum = 0;
  for (int64_t j = 0; j < V; ++j) sum += std::exp(x[j] - mx);
  return mx + std::log(sum);
}

void check_target(int64_t row, int32_t t, int64_t V, int32_t ignore_index) {
  ACC_CHECK(t == ignore_index || (t >= 0 && t < V), "ref::cross_entropy: target of row ", row,
            " is ", t, "; expected a class in [0, ", V, ")");
}

}  // namespace

int64_t cross_entropy_fwd(const float* logits, const int32_t* targets, float* losses, float* lse,
                          int64_t N, int64_t V, int32_t ignore_index) {
  int64_t kept = 0;
  for (int64_t i = 0; i < N; ++i) {
    check_target(i, targets[i], V, ignore_index);
    const double l = row_lse(logits + i * V, V);
    lse[i] = static_cast<float>(l);
    const bool ignored = targets[i] == ignore_index;
    losses[i] = ignored ? 0.f : static_cast<float>(l - logits[i * V + targets[i]]);
    kept += ignored ? 0 : 1;
  }
  return kept;
}

void cross_entropy_bwd(const float* logits, const int32_t* targets, const float* lse,
                       const float* dloss, float* dlogits, int64_t N, int64_t V,
                       int32_t ignore_index) {
  for (int64_t i = 0; i < N; ++i) {
    check_target(i, targets[i], V, ignore_index);
    const bool ignored = targets[i] == ignore_index;
    for (int64_t j = 0; j < V; ++j) {
      const double p = std::exp(static_cast<double>(logits[i * V + j]) - lse[i]);
      const double onehot = j == targets[i] ? 1.0 : 0.0;
      dlogits[i * V + j] = ignored ? 0.f : static_cast<float>(dloss[i] * (p - onehot));
    }
  }
}

}  // namespace acc::kernels::ref
