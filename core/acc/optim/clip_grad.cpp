#include "acc/optim/clip_grad.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_reduce.h>

#include <cmath>

#include "acc/kernels/convert.h"

namespace acc::optim {

namespace {

constexpr int64_t kGrain = 1 << 15;

inline float as_float(float v) { return v; }
inline float as_float(bfloat16 v) { return kernels::to_f32(v); }

template <class T>
double square_sum(const T* p, int64_t n) {
  return tbb::parallel_reduce(
      tbb::blocked_range<int64_t>(0, n, kGrain), 0.0,
      [&](const tbb::blocked_range<int64_t>& r, double acc) {
        for (int64_t i = r.begin(); i < r.end(); ++i) {
          const double v = as_float(p[i]);
          acc += v * v;
        }
        return acc;
      },
      [](double a, double b) { return a + b; });
}

}  // namespace

double grad_square_sum(const Tensor& grad) {
  ACC_CHECK(is_floating(grad.dtype()), "clip_grad_norm: gradient ", grad.describe(),
            " must be f32 or bf16");
  return grad.dtype() == DType::f32 ? square_sum(grad.data<float>(), grad.numel())
                                    : square_sum(grad.data<bfloat16>(), grad.numel());
}

void scale_grad(const Tensor& grad, double factor) {
  const float f = static_cast<float>(factor);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, grad.numel(), kGrain),
                    [&](const tbb::blocked_range<int64_t>& r) {
                      if (grad.dtype() == DType::f32) {
                        float* p = grad.data<float>();
                        for (int64_t i = r.begin(); i < r.end(); ++i) p[i] *= f;
                      } else {
                        bfloat16* p = grad.data<bfloat16>();
                        for (int64_t i = r.begin(); i < r.end(); ++i)
                          p[i] = kernels::to_bf16(kernels::to_f32(p[i]) * f);
                      }
                    });
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  std::vector<Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  return clip_grad_norm(grads, std::vector<int>(grads.size(), 1), {}, max_norm);
}

double clip_grad_norm(const std::vector<Tensor>& grads, const std::vector<int>& copies,
                      const std::function<double(double)>& sum_over_ranks, double max_norm) {
  ACC_CHECK(max_norm > 0, "clip_grad_norm: max_norm must be positive, got ", max_norm);
  ACC_CHECK(copies.size() == grads.size(), "clip_grad_norm: ", copies.size(), " copy counts for ", grads.size(),
            " gradients");
  double squares = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    ACC_CHECK(copies[i] >= 1, "clip_grad_norm: gradient ", grads[i].describe(), " has ", copies[i], " copies");
    squares += grad_square_sum(grads[i]) / copies[i];
  }
  const double norm = std::sqrt(sum_over_ranks ? sum_over_ranks(squares) : squares);
  if (norm > max_norm)
    for (const auto& g : grads) scale_grad(g, max_norm / norm);
  return norm;
}

}  // namespace acc::optim
