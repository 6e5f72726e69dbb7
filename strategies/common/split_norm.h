#pragma once
// Layer norm and RMS norm over a last dimension that is split across a process group: each rank
// holds its columns x [..., c_r] of the whole [..., C], and gamma/beta its slice of them. The
// per-row statistics are summed over the group, so every rank normalises its columns exactly as
// ops::layer_norm / ops::rms_norm normalise the whole row:
//
//   forward                                   backward
//   layer norm: all-reduce of the row sums,   all-reduce of two row sums of the output gradient
//   then of the centred squares (mean, var)   (sum(dy*gamma), sum(dy*gamma*xhat))
//   RMS norm: all-reduce of the squares       all-reduce of sum(dy*gamma*xhat)
//
// The parameters' gradients are this rank's columns only; whoever holds them whole completes
// them (the caller slices the parameters with scatter_slices, whose backward gathers them).
// Computes in f32 (bf16 inputs are widened), as the ops do; each message is one or two floats
// per row.
#include <memory>

#include "acc/distributed/process_group.h"
#include "acc/tensor/tensor.h"

namespace acc::parallel {

// `cols` is the whole row's C; x's last dim is this rank's share of it.
Tensor split_layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps, int64_t cols,
                        const std::shared_ptr<dist::ProcessGroup>& group);
Tensor split_rms_norm(const Tensor& x, const Tensor& gamma, double eps, int64_t cols,
                      const std::shared_ptr<dist::ProcessGroup>& group);

}  // namespace acc::parallel
