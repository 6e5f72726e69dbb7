#pragma once
// Losses (kernels::cross_entropy).
#include <cstdint>

#include "acc/tensor/tensor.h"

namespace acc::ops {

// The target that marks a row to leave out of the loss (padding), as in PyTorch.
inline constexpr int32_t kIgnoreIndex = -100;

// Mean cross-entropy of logits [N, V] against targets i32 [N] (i64 accepted) over the rows whose
// target is not ignore_index; a scalar []. With every row ignored the loss is 0 and backward sends no
// gradient (it still runs, so a training step over such a batch does not fail).
// grad_dtype is the dtype of the gradient sent back to the logits: bf16 when they come from a
// bf16 product, whose backward would round an f32 gradient to bf16 anyway (same bits, and the
// [N, V] f32 gradient is never written).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int32_t ignore_index = kIgnoreIndex,
                     DType grad_dtype = DType::f32);

}  // namespace acc::ops
