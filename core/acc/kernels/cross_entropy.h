#pragma once
// Cross-entropy of logits [N, V] (f32) against int32 targets [N], processed in row chunks so a
// large vocabulary never needs a second [N, V] buffer. Rows whose target equals ignore_index
// contribute no loss and get a zero gradient.
#include <cstdint>

#include "acc/tensor/dtype.h"

namespace acc::kernels {

// The rows whose target is not ignore_index; throws acc::Error naming `op`, the row and the
// value for a target outside [0, V).
int64_t count_and_check_targets(const char* op, const int32_t* targets, int64_t N, int64_t V,
                                int32_t ignore_index = -100);
// losses[i] = lse_i - logits[i, target_i] (0 for ignored rows); lse is saved for backward.
// Returns the number of rows that were not ignored. Targets outside [0, V) (other than
// ignore_index) throw acc::Error naming the row and value.
int64_t cross_entropy_fwd(const float* logits, const int32_t* targets, float* losses, float* lse,
                          int64_t N, int64_t V, int32_t ignore_index = -100);
// dlogits[i, :] = dloss[i] * (softmax(logits[i]) - onehot(target_i)); 0 for ignored rows.
// dlogits may alias logits (in-place, saves N*V floats).
void cross_entropy_bwd(const float* logits, const int32_t* targets, const float* lse,
                       const float* dloss, float* dlogits, int64_t N, int64_t V,
                       int32_t ignore_index = -100);
// The same gradient rounded to bf16 (exactly as f32_to_bf16 of the f32 one), written without
// an f32 [N, V] buffer: for logits whose producer computes in bf16 and would round it anyway.
void cross_entropy_bwd(const float* logits, const int32_t* targets, const float* lse,
                       const float* dloss, bfloat16* dlogits, int64_t N, int64_t V,
                       int32_t ignore_index = -100);

// A vocabulary split over ranks: each holds logits [N, V] for columns [first, first + V) of
// every row, and the rows' losses need the log-sum-exp over all columns, combined from each
// piece's. lse[i] = log(sum(exp(logits[i, :]))) over the piece (-inf when V = 0).
void logsumexp_rows(const float* logits, float* lse, int64_t N, int64_t V);
// cross_entropy_bwd on such a piece: lse is the whole row's, targets are whole-row classes, and
// a target outside [first, first + V) gets no one-hot term here. Targets are not checked.
void cross_entropy_bwd_columns(const float* logits, const int32_t* targets, int64_t first,
                               const float* lse, const float* dloss, float* dlogits, int64_t N,
                               int64_t V, int32_t ignore_index = -100);
void cross_entropy_bwd_columns(const float* logits, const int32_t* targets, int64_t first,
                               const float* lse, const float* dloss, bfloat16* dlogits, int64_t N,
                               int64_t V, int32_t ignore_index = -100);

namespace ref {
int64_t cross_entropy_fwd(const float* logits, const int32_t* targets, float* losses, float* lse,
                          int64_t N, int64_t V, int32_t ignore_index = -100);
void cross_entropy_bwd(const float* logits, const int32_t* targets, const float* lse,
                       const float* dloss, float* dlogits, int64_t N, int64_t V,
                       int32_t ignore_index = -100);
}  // namespace ref

}  // namespace acc::kernels
