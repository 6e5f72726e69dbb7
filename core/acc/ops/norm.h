#pragma once
// Normalisation over the last dimension (kernels::layernorm / rmsnorm), x [..., C].
#include "acc/tensor/tensor.h"

namespace acc::ops {

// gamma and beta are [C] and may be undefined (scale 1 / shift 0).
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const Tensor& gamma, double eps = 1e-6);

}  // namespace acc::ops
