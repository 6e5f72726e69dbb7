#pragma once
// Gradient-norm clipping.
#include <functional>
#include <vector>

#include "acc/tensor/tensor.h"

namespace acc::optim {

// The global L2 norm of the gradients of `params` (those without a gradient are skipped),
// accumulated in double. When it exceeds max_norm every gradient is scaled in place by
// max_norm / norm, so the clipped norm is max_norm. Returns the norm before clipping.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm);

// The clipping every strategy shares, for gradients spread over ranks: each gradient's square
// sum counts 1 / copies[i] (copies: the ranks holding that same gradient, so replicas count
// once), the ranks' sums are added by `sum_over_ranks` (unset: this process holds the whole
// model), and every gradient is scaled by max_norm / norm when the norm exceeds max_norm.
// Returns the norm before clipping.
double clip_grad_norm(const std::vector<Tensor>& grads, const std::vector<int>& copies,
                      const std::function<double(double)>& sum_over_ranks, double max_norm);

// The sum of squares of one gradient (f32 or bf16), in double: a building block for sharded
// clipping, where each rank sums its shard and the totals are all-reduced.
double grad_square_sum(const Tensor& grad);
// grad *= factor in place.
void scale_grad(const Tensor& grad, double factor);

}  // namespace acc::optim
