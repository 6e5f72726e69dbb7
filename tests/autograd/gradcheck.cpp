#include <gtest/gtest.h>

#include "gradcheck.h"

#include <cmath>
#include <sstream>

#include "acc/autograd/grad_mode.h"
#include "support/test_support.h"

namespace acc::test {

namespace {

double weighted_loss(const Tensor& y, const std::vector<float>& w) {
  const std::vector<float> v = y.to_vector();
  double loss = 0;
  for (size_t i = 0; i < v.size(); ++i) loss += static_cast<double>(v[i]) * w[i];
  return loss;
}

}  // namespace

std::vector<Tensor> random_leaves(const std::vector<Shape>& shapes, uint64_t seed, float scale) {
  std::vector<Tensor> out;
  for (const auto& shape : shapes) {
    out.push_back(Tensor::from_vector(random_vector(shape_numel(shape), seed++, scale), shape));
    out.back().set_requires_grad(true);
  }
  return out;
}

::testing::AssertionResult gradcheck(const OpFn& f, const std::vector<Tensor>& inputs,
                                     const GradcheckOptions& options) {
  Tensor y = f(inputs);
  const std::vector<float> w = random_vector(y.numel(), 777);
  y.backward(Tensor::from_vector(w, y.shape()));
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Tensor& x = inputs[k];
    if (!x.requires_grad()) continue;
    if (!x.grad().defined())
      return ::testing::AssertionFailure() << "input " << k << " got no gradient";
    const std::vector<float> analytic = x.grad().to_vector();
    float* p = x.data<float>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float saved = p[i];
      autograd::NoGradGuard no_grad;
      p[i] = saved + static_cast<float>(options.eps);
      const double plus = weighted_loss(f(inputs), w);
      p[i] = saved - static_cast<float>(options.eps);
      const double minus = weighted_loss(f(inputs), w);
      p[i] = saved;
      const double numeric = (plus - minus) / (2 * options.eps);
      const double a = analytic[static_cast<size_t>(i)];
      if (std::fabs(a - numeric) > options.atol + options.rtol * std::fabs(numeric))
        return ::testing::AssertionFailure()
               << "input " << k << " " << x.describe() << " element " << i << ": analytic " << a
               << " vs numeric " << numeric;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace acc::test
