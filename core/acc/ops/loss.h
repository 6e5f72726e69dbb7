#pragma once
// Losses (kernels::cross_entropy).
#include <cstdint>

#include "acc/tensor/tensor.h"

namespace acc::ops {

// Mean cross-entropy of logits [N, V] against targets i32 [N] (i64 accepted) over the rows whose
// target is not ignore_index; a scalar []. With every row ignored the loss is 0 and backward sends no
// gradient (it still runs, so a training step over such a batch does not fail).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int32_t ignore_index = -100);

}  // namespace acc::ops
