#pragma once
// Gradient arithmetic the engine needs without going through the (recorded) ops layer.
#include "acc/tensor/tensor.h"

namespace acc::autograd {

// dst += src elementwise (same numel); dst may be f32 or bf16, src f32 or bf16. Sums in f32.
void add_into(const Tensor& dst, const Tensor& src);

// a + b for two gradients of one tensor; reuses a's buffer when nothing else refers to it.
Tensor sum_gradients(Tensor a, const Tensor& b);

}  // namespace acc::autograd
