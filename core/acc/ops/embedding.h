#pragma once
// Embedding lookup (kernels::embedding): table [V, C], ids i32 or i64 of any shape [...] ->
// [..., C]. Only the table receives a gradient.
#include "acc/tensor/tensor.h"

namespace acc::ops {

Tensor embedding(const Tensor& table, const Tensor& ids);

}  // namespace acc::ops
