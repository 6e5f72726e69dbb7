#pragma once
// The collectives tensor parallelism inserts between operations, as differentiable ops over the
// process group of the `model` mesh axis (Megatron-LM's f and g; the vocabulary-parallel head's
// loss is fsdp/vocab_parallel.h with replicated rows):
//
//   op                        forward                          backward
//   enter_parallel_region     identity (x is whole on every    all-reduce: each rank's
//                             rank of the group)               gradient is a partial sum
//   reduce_partial_sums       all-reduce of partial sums       identity
//   gather_slices             all-gather of the ranks' slices  this rank's slice of the
//                             along one dim                    gradient, times `scale`
//
// Sequence parallelism moves activations between whole and split along one dim (the
// sequence) with the slices' extents known to every rank (split_sizes of the whole extent):
//
//   scatter_slices            this rank's slice of x (whole    all-gather of the slices: x's
//                             and the same on every rank)      gradient is whole again
//   reduce_scatter_slices     reduce-scatter of partial sums,  all-gather
//                             each rank keeping its slice
//
// Splits over the group are as even as they can be: rank r of n holds split_sizes(extent, n)[r]
// (the first extent % n ranks one more), so a vocabulary of 50257 splits too.
#include <memory>
#include <vector>

#include "acc/distributed/process_group.h"
#include "acc/tensor/tensor.h"

namespace acc::parallel {

Tensor enter_parallel_region(const Tensor& x, const std::shared_ptr<dist::ProcessGroup>& group);
Tensor reduce_partial_sums(const Tensor& x, const std::shared_ptr<dist::ProcessGroup>& group);
// The ranks' slices of a tensor split along `dim` (extents may differ), joined in rank order.
// `scale` multiplies the gradient's slice: over a data-parallel axis, whose gradients the
// strategy averages, a loss computed from the whole tensor needs the group's size there.
Tensor gather_slices(const Tensor& x, int dim, const std::shared_ptr<dist::ProcessGroup>& group, double scale = 1.0);
// The same with the ranks' extents along `dim` known (no exchange of them first).
Tensor gather_slices(const Tensor& x, int dim, const std::vector<int64_t>& extents,
                     const std::shared_ptr<dist::ProcessGroup>& group, double scale = 1.0);

Tensor scatter_slices(const Tensor& x, int dim, const std::vector<int64_t>& extents,
                      const std::shared_ptr<dist::ProcessGroup>& group);
Tensor reduce_scatter_slices(const Tensor& x, int dim, const std::vector<int64_t>& extents,
                             const std::shared_ptr<dist::ProcessGroup>& group);

std::vector<int64_t> split_sizes(int64_t extent, int ranks);

// Not differentiable: the ranks' slices along `dim` joined in rank order (one all_gather_v), and
// the sum over the group of every rank's whole `x`, this rank keeping its slice along `dim`
// (one reduce_scatter_v).
Tensor joined_slices(const Tensor& mine, size_t dim, const std::vector<int64_t>& extents, dist::ProcessGroup& group);
Tensor summed_slice(const Tensor& x, size_t dim, const std::vector<int64_t>& extents, dist::ProcessGroup& group);

// Not differentiable: every rank's slice of a tensor split along `dim`, rank r's holding
// extents[r] indices of it (its other dims those of `mine`), in rank order: one all_gather_v,
// cut into views.
std::vector<Tensor> all_gather_slices(const Tensor& mine, size_t dim, const std::vector<int64_t>& extents,
                                      dist::ProcessGroup& group);

}  // namespace acc::parallel
