#pragma once
// Finite-difference gradient checking for ops.
//
// The loss is L = sum_i w_i * f(inputs)_i with fixed random weights w (so every output element
// matters differently), accumulated in double. For each element of each input we compare the
// analytic dL/dx (from backward with seed w) with the central difference
// (L(x+eps) - L(x-eps)) / (2 eps) evaluated in f32 forward passes.
#include <functional>
#include <vector>

#include "acc/tensor/tensor.h"

namespace acc::test {

using V = std::vector<Tensor>;
using OpFn = std::function<Tensor(const V&)>;

struct GradcheckOptions {
  // f32 inputs are perturbed by eps: the truncation error of a central difference is
  // O(eps^2 * f'''), ~1e-4 for our smooth ops at eps=1e-2, while the f32 rounding of the loss
  // (~1e-7 * sum|w*y|) divided by 2*eps stays below ~1e-4 for our small shapes. The tolerances
  // below cover both with margin yet catch any wrong term (errors of O(1) relative size).
  double eps = 1e-2;
  double rtol = 2e-2;
  double atol = 2e-3;
};

// Makes f32 leaves requiring grad from random data (one tensor per shape).
std::vector<Tensor> random_leaves(const std::vector<Shape>& shapes, uint64_t seed, float scale = 1.f);

// Returns success, or a failure naming the input, element, analytic and numeric values.
::testing::AssertionResult gradcheck(const OpFn& f, const std::vector<Tensor>& inputs,
                                     const GradcheckOptions& options = {});

}  // namespace acc::test
