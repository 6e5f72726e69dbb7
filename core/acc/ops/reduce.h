#pragma once
// Reductions (accumulated in double, returned as f32).
#include "acc/tensor/tensor.h"

namespace acc::ops {

Tensor sum(const Tensor& x);   // all elements -> shape []
Tensor mean(const Tensor& x);  // all elements -> shape []
Tensor sum_last(const Tensor& x);   // over the last dimension: [..., C] -> [...]
Tensor mean_last(const Tensor& x);  // over the last dimension: [..., C] -> [...]

}  // namespace acc::ops
