// Reference attention: full [T, T] scores per head in double precision, for tests.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "acc/kernels/attention.h"

namespace acc::kernels::ref {
namespace {

struct Heads {
  const AttentionShape& s;
  double scale() const {
    return s.scale != 0.f ? s.scale : 1.0 / std::sqrt(static_cast<double>(s.D));
  }
  int64_t q(int64_t b, int64_t h) const { return (b * s.H + h) * s.T * s.D; }
  int64_t kv(int64_t b, int64_t h) const { return (b * s.Hkv + h / (s.H / s.Hkv)) * s.T * s.D; }
  double dot(const float* x, const float* y) const {
    double sum = 0;
    for (int64_t d = 0; d < s.D; ++d) sum += static_cast<double>(x[d]) * y[d];
    return sum;
  }
};

}  // namespace

void attention_fwd(const float* q, const float* k, const float* v, float* out, float* lse,
                   const AttentionShape& s) {
  const Heads at{s};
  const int64_t T = s.T, D = s.D;
  std::vector<double> p(T);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const float *qh = q + at.q(b, h), *kh = k + at.kv(b, h), *vh = v + at.kv(b, h);
      for (int64_t i = 0; i < T; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= i; ++j)
          mx = std::max(mx, p[j] = at.dot(qh + i * D, kh + j * D) * at.scale());
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += p[j] = std::exp(p[j] - mx);
        for (int64_t d = 0; d < D; ++d) {
          double o = 0;
          for (int64_t j = 0; j <= i; ++j) o += p[j] * vh[j * D + d];
          out[at.q(b, h) + i * D + d] = static_cast<float>(o / sum);
        }
        lse[(b * s.H + h) * T + i] = static_cast<float>(mx + std::log(sum));
      }
    }
}

void attention_bwd(const float* dout, const float* q, const float* k, const float* v,
                   const float* out, const float* lse, float* dq, float* dk, float* dv,
                   const AttentionShape& s) {
  const Heads at{s};
  const int64_t T = s.T, D = s.D;
  const int64_t q_size = s.B * s.H * T * D, kv_size = s.B * s.Hkv * T * D;
  std::vector<double> gq(q_size, 0.0), gk(kv_size, 0.0), gv(kv_size, 0.0);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.H; ++h) {
      const int64_t qo = at.q(b, h), kvo = at.kv(b, h);
      for (int64_t i = 0; i < T; ++i) {
        const double delta = at.dot(dout + qo + i * D, out + qo + i * D);
        const double row_lse = lse[(b * s.H + h) * T + i];
        for (int64_t j = 0; j <= i; ++j) {
          const double p = std::exp(at.dot(q + qo + i * D, k + kvo + j * D) * at.scale() - row_lse);
          const double dp = at.dot(dout + qo + i * D, v + kvo + j * D);
          const double dscore = p * (dp - delta) * at.scale();
          for (int64_t d = 0; d < D; ++d) {
            gv[kvo + j * D + d] += p * dout[qo + i * D + d];
            gq[qo + i * D + d] += dscore * k[kvo + j * D + d];
            gk[kvo + j * D + d] += dscore * q[qo + i * D + d];
          }
        }
      }
    }
  std::transform(gq.begin(), gq.end(), dq, [](double x) { return static_cast<float>(x); });
  std::transform(gk.begin(), gk.end(), dk, [](double x) { return static_cast<float>(x); });
  std::transform(gv.begin(), gv.end(), dv, [](double x) { return static_cast<float>(x); });
}

}  // namespace acc::kernels::ref
