#pragma once
// Shape ops. reshape returns a view (same storage); the others materialise contiguous copies.
#include <vector>

#include "acc/tensor/tensor.h"

namespace acc::ops {

Tensor reshape(const Tensor& x, const Shape& shape);  // one -1 is inferred
Tensor view(const Tensor& x, const Shape& shape);     // same as reshape (tensors are contiguous)
// out.shape[i] = x.shape[dims[i]]; e.g. permute(x, {0, 2, 1, 3}) for [B,T,H,D] <-> [B,H,T,D].
Tensor permute(const Tensor& x, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& x);  // swaps the last two dimensions
// Elements [start, start+length) along dim.
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
// Consecutive pieces along dim with the given sizes (which must add up to x.size(dim)).
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim);
// Joins tensors that agree on every dimension but `dim`.
Tensor concat(const std::vector<Tensor>& xs, int64_t dim);
// Converted copy; the gradient flows back unchanged (gradients are f32 in flight).
Tensor cast(const Tensor& x, DType dtype);

}  // namespace acc::ops
