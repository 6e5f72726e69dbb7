#include "acc/kernels/optimizer.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "acc/kernels/convert.h"
#include "acc/kernels/detail/avx2_math.h"
#include "acc/kernels/detail/bf16_avx2.h"
#include "acc/kernels/detail/parallel.h"
#include "acc/util/error.h"

namespace acc::kernels {
namespace {

using detail::Lanes;

// Stores the updated parameters' bf16 copy for one lane group (the tail goes element-wise, as
// AVX2 has no 16-bit masked store; to_bf16 rounds exactly like pack8_bf16).
void store_bf16(bfloat16* dst, const float* p, __m256 v, const Lanes& l, int64_t count) {
  if (l.full) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), detail::pack8_bf16(v));
  } else {
    for (int64_t k = 0; k < count; ++k) dst[k] = to_bf16(p[k]);
  }
}

// Runs body(i, lanes, count) over [0, n) in parallel chunks of 8-lane groups.
template <class Body>
void update_loop(int64_t n, Body&& body) {
  detail::parallel_ranges(n, detail::kElemsPerTask, [&](int64_t b, int64_t e) {
    detail::for_each_lanes(e - b, [&](int64_t i, const Lanes& l) { body(b + i, l, std::min<int64_t>(8, e - b - i)); });
  });
}

void check_adamw(int64_t n, const AdamWParams& h) {
  ACC_CHECK(n >= 0, "adamw_step: expected n >= 0, got ", n);
  ACC_CHECK(h.step >= 1, "adamw_step: step is 1-based, got step=", h.step);
  ACC_CHECK(h.lr >= 0.f && h.eps >= 0.f && h.weight_decay >= 0.f, "adamw_step: expected lr, eps, ",
            "weight_decay >= 0, got lr=", h.lr, " eps=", h.eps, " weight_decay=", h.weight_decay);
  ACC_CHECK(h.beta1 >= 0.f && h.beta1 < 1.f && h.beta2 >= 0.f && h.beta2 < 1.f,
            "adamw_step: expected betas in [0, 1), got beta1=", h.beta1, " beta2=", h.beta2);
}

void check_sgd(int64_t n, const float* momentum_buf, const SGDParams& h) {
  ACC_CHECK(n >= 0, "sgd_step: expected n >= 0, got ", n);
  ACC_CHECK(h.lr >= 0.f && h.momentum >= 0.f && h.weight_decay >= 0.f,
            "sgd_step: expected lr, momentum, weight_decay >= 0, got lr=", h.lr, " momentum=",
            h.momentum, " weight_decay=", h.weight_decay);
  ACC_CHECK(!h.nesterov || (h.momentum > 0.f && h.dampening == 0.f),
            "sgd_step: nesterov needs momentum > 0 and dampening == 0, got momentum=", h.momentum,
            " dampening=", h.dampening);
  ACC_CHECK(h.momentum == 0.f || momentum_buf, "sgd_step: momentum=", h.momentum,
            " needs a momentum buffer, got null");
}

// Per-step scalars of AdamW, as PyTorch forms them.
struct AdamWScalars {
  float decay, step_size, bc2_sqrt;
  explicit AdamWScalars(const AdamWParams& h)
      : decay(1.f - h.lr * h.weight_decay),
        step_size(static_cast<float>(h.lr / (1.0 - std::pow(static_cast<double>(h.beta1), static_cast<double>(h.step))))),
        bc2_sqrt(static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(h.beta2), static_cast<double>(h.step))))) {}
};

}  // namespace

void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n,
                const AdamWParams& h, bfloat16* param_bf16) {
  check_adamw(n, h);
  const AdamWScalars k(h);
  const __m256 decay = _mm256_set1_ps(k.decay), b1 = _mm256_set1_ps(h.beta1),
               b2 = _mm256_set1_ps(h.beta2), c1 = _mm256_set1_ps(1.f - h.beta1),
               c2 = _mm256_set1_ps(1.f - h.beta2), eps = _mm256_set1_ps(h.eps),
               step = _mm256_set1_ps(k.step_size), bc2 = _mm256_set1_ps(k.bc2_sqrt);
  update_loop(n, [&](int64_t i, const Lanes& l, int64_t count) {
    const __m256 g = l.load(grad + i);
    const __m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, l.load(m + i)), _mm256_mul_ps(c1, g));
    const __m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, l.load(v + i)), _mm256_mul_ps(c2, _mm256_mul_ps(g, g)));
    const __m256 denom = _mm256_add_ps(_mm256_div_ps(_mm256_sqrt_ps(vi), bc2), eps);
    const __m256 p = _mm256_sub_ps(_mm256_mul_ps(l.load(param + i), decay),
                                   _mm256_mul_ps(step, _mm256_div_ps(mi, denom)));
    l.store(m + i, mi);
    l.store(v + i, vi);
    l.store(param + i, p);
    if (param_bf16) store_bf16(param_bf16 + i, param + i, p, l, count);
  });
}

void sgd_step(float* param, const float* grad, float* momentum_buf, int64_t n, const SGDParams& h,
              bfloat16* param_bf16) {
  check_sgd(n, momentum_buf, h);
  const __m256 wd = _mm256_set1_ps(h.weight_decay), mu = _mm256_set1_ps(h.momentum),
               keep = _mm256_set1_ps(1.f - h.dampening), lr = _mm256_set1_ps(h.lr);
  const bool use_momentum = h.momentum != 0.f;
  update_loop(n, [&](int64_t i, const Lanes& l, int64_t count) {
    const __m256 p0 = l.load(param + i);
    __m256 g = _mm256_fmadd_ps(wd, p0, l.load(grad + i));
    if (use_momentum) {
      const __m256 buf = h.first_step ? g : _mm256_fmadd_ps(mu, l.load(momentum_buf + i), _mm256_mul_ps(keep, g));
      l.store(momentum_buf + i, buf);
      g = h.nesterov ? _mm256_fmadd_ps(mu, buf, g) : buf;
    }
    const __m256 p = _mm256_fnmadd_ps(lr, g, p0);
    l.store(param + i, p);
    if (param_bf16) store_bf16(param_bf16 + i, param + i, p, l, count);
  });
}

// References: PyTorch's update rules written out per element.
namespace ref {
void adamw_step(float* param, const float* grad, float* m, float* v, int64_t n,
                const AdamWParams& h, bfloat16* param_bf16) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(h.beta1), static_cast<double>(h.step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(h.beta2), static_cast<double>(h.step));
  for (int64_t i = 0; i < n; ++i) {
    param[i] *= 1.f - h.lr * h.weight_decay;
    m[i] = h.beta1 * m[i] + (1.f - h.beta1) * grad[i];
    v[i] = h.beta2 * v[i] + (1.f - h.beta2) * grad[i] * grad[i];
    const double denom = std::sqrt(static_cast<double>(v[i])) / std::sqrt(bc2) + h.eps;
    param[i] = static_cast<float>(param[i] - h.lr / bc1 * m[i] / denom);
    if (param_bf16) param_bf16[i] = to_bf16(param[i]);
  }
}

void sgd_step(float* param, const float* grad, float* momentum_buf, int64_t n, const SGDParams& h,
              bfloat16* param_bf16) {
  for (int64_t i = 0; i < n; ++i) {
    float g = grad[i] + h.weight_decay * param[i];
    if (h.momentum != 0.f) {
      momentum_buf[i] = h.first_step ? g : h.momentum * momentum_buf[i] + (1.f - h.dampening) * g;
      g = h.nesterov ? g + h.momentum * momentum_buf[i] : momentum_buf[i];
    }
    param[i] -= h.lr * g;
    if (param_bf16) param_bf16[i] = to_bf16(param[i]);
  }
}
}  // namespace ref

}  // namespace acc::kernels
