#pragma once
// Element-wise arithmetic. Binary ops broadcast b over the leading dimensions of a only: b's
// shape must equal a's or be a suffix of it ([B,T,C] op [C], [B,T,C] op [T,C], or a scalar []).
// Outputs are f32; bf16 inputs are converted first.
#include "acc/tensor/tensor.h"

namespace acc::ops {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);

Tensor add(const Tensor& a, double s);
Tensor sub(const Tensor& a, double s);
Tensor mul(const Tensor& a, double s);
Tensor div(const Tensor& a, double s);
Tensor scale(const Tensor& a, double s);  // a * s
Tensor neg(const Tensor& a);

}  // namespace acc::ops
