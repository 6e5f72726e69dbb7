#pragma once
// Matrix products through kernels::matmul. Inputs may be f32 or bf16; when either is bf16 the
// product runs with bf16 inputs (the other is converted) and f32 output, and the backward
// products use bf16 inputs too. A bf16 leaf receives a bf16 gradient.
#include "acc/tensor/tensor.h"

namespace acc::ops {

// op(a) * op(b): 2-D a [M,K] (or [K,M] with trans_a) times b [K,N] (or [N,K] with trans_b),
// or batched 3-D with the same leading batch size on both.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

// x [..., in] * w[out, in]^T + bias[out] (PyTorch's convention); bias may be undefined.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor());

}  // namespace acc::ops
