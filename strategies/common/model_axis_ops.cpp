#include "model_axis_ops.h"

#include <numeric>

#include "acc/autograd/function.h"
#include "acc/ops/ops.h"

namespace acc::parallel {

namespace {

// A summed copy: the group's collectives take flat tensors, and the input may be read elsewhere.
Tensor all_reduced(const Tensor& x, dist::ProcessGroup& group) {
  Tensor sum = x.clone();
  group.all_reduce(sum.view({sum.numel()}));
  return sum;
}

Tensor rank_slice(const Tensor& x, size_t dim, const std::vector<int64_t>& extents, int rank) {
  int64_t start = 0;
  for (int r = 0; r < rank; ++r) start += extents[static_cast<size_t>(r)];
  return ops::narrow(x, static_cast<int64_t>(dim), start, extents[static_cast<size_t>(rank)]);
}

size_t positive_dim(int dim, const Tensor& x) { return static_cast<size_t>(dim < 0 ? dim + x.dim() : dim); }

}  // namespace

Tensor enter_parallel_region(const Tensor& x, const std::shared_ptr<dist::ProcessGroup>& group) {
  if (group->size() == 1) return x;
  return autograd::apply_function(
      "EnterParallelRegion", {x},
      [](autograd::FunctionContext&, const std::vector<Tensor>& in) { return in[0]; },
      [group](autograd::FunctionContext&, const Tensor& grad) -> std::vector<Tensor> {
        return {all_reduced(grad, *group)};
      });
}

Tensor reduce_partial_sums(const Tensor& x, const std::shared_ptr<dist::ProcessGroup>& group) {
  if (group->size() == 1) return x;
  return autograd::apply_function(
      "ReducePartialSums", {x},
      [group](autograd::FunctionContext&, const std::vector<Tensor>& in) {
        return all_reduced(in[0], *group);
      },
      [](autograd::FunctionContext&, const Tensor& grad) -> std::vector<Tensor> { return {grad}; });
}

Tensor gather_slices(const Tensor& x, int dim, const std::shared_ptr<dist::ProcessGroup>& group, double scale) {
  if (group->size() == 1) return x;
  Tensor all_extents = Tensor::empty({group->size()}, DType::i64);
  group->all_gather(Tensor::from_vector_i64({x.size(static_cast<int>(positive_dim(dim, x)))}, {1}), all_extents);
  const auto* e = all_extents.data<int64_t>();
  return gather_slices(x, dim, std::vector<int64_t>(e, e + group->size()), group, scale);
}

Tensor gather_slices(const Tensor& x, int dim, const std::vector<int64_t>& extents,
                     const std::shared_ptr<dist::ProcessGroup>& group, double scale) {
  if (group->size() == 1) return x;
  const size_t d = positive_dim(dim, x);
  auto forward = [group, extents, d](autograd::FunctionContext&, const std::vector<Tensor>& in) {
    return joined_slices(in[0], d, extents, *group);
  };
  auto backward = [group, extents, d, scale](autograd::FunctionContext&, const Tensor& grad) -> std::vector<Tensor> {
    const Tensor mine = rank_slice(grad, d, extents, group->rank());
    return {scale == 1.0 ? mine : ops::scale(mine, scale)};
  };
  return autograd::apply_function("GatherSlices", {x}, forward, backward);
}

Tensor scatter_slices(const Tensor& x, int dim, const std::vector<int64_t>& extents,
                      const std::shared_ptr<dist::ProcessGroup>& group) {
  if (group->size() == 1) return x;
  const size_t d = positive_dim(dim, x);
  return autograd::apply_function(
      "ScatterSlices", {x},
      [group, extents, d](autograd::FunctionContext&, const std::vector<Tensor>& in) {
        return rank_slice(in[0], d, extents, group->rank());
      },
      [group, extents, d](autograd::FunctionContext&, const Tensor& grad) -> std::vector<Tensor> {
        return {joined_slices(grad, d, extents, *group)};
      });
}

Tensor reduce_scatter_slices(const Tensor& x, int dim, const std::vector<int64_t>& extents,
                             const std::shared_ptr<dist::ProcessGroup>& group) {
  if (group->size() == 1) return x;
  const size_t d = positive_dim(dim, x);
  return autograd::apply_function(
      "ReduceScatterSlices", {x},
      [group, extents, d](autograd::FunctionContext&, const std::vector<Tensor>& in) {
        return summed_slice(in[0], d, extents, *group);
      },
      [group, extents, d](autograd::FunctionContext&, const Tensor& grad) -> std::vector<Tensor> {
        return {joined_slices(grad, d, extents, *group)};
      });
}

Tensor summed_slice(const Tensor& x, size_t dim, const std::vector<int64_t>& extents, dist::ProcessGroup& group) {
  std::vector<Tensor> flat_slices;  // rank-major, so each rank's slice is one contiguous run
  std::vector<int64_t> counts;
  for (const Tensor& slice : ops::split(x, extents, static_cast<int64_t>(dim))) {
    flat_slices.push_back(slice.view({slice.numel()}));
    counts.push_back(slice.numel());
  }
  Shape shape = x.shape();
  shape[dim] = extents[static_cast<size_t>(group.rank())];
  Tensor mine = Tensor::empty(shape, x.dtype());
  group.reduce_scatter_v(ops::concat(flat_slices, 0), mine.view({mine.numel()}), counts);
  return mine;
}

Tensor joined_slices(const Tensor& mine, size_t dim, const std::vector<int64_t>& extents, dist::ProcessGroup& group) {
  return ops::concat(all_gather_slices(mine, dim, extents, group), static_cast<int64_t>(dim));
}

std::vector<Tensor> all_gather_slices(const Tensor& mine, size_t dim, const std::vector<int64_t>& extents,
                                      dist::ProcessGroup& group) {
  int64_t per_index = 1;  // elements per index of dim (from the shape: mine may hold none)
  for (size_t d = 0; d < mine.shape().size(); ++d)
    if (d != dim) per_index *= mine.shape()[d];
  std::vector<int64_t> counts;
  for (int64_t extent : extents) counts.push_back(extent * per_index);
  Tensor flat = Tensor::empty({std::accumulate(counts.begin(), counts.end(), int64_t{0})}, mine.dtype());
  group.all_gather_v(mine.view({mine.numel()}), flat, counts);
  std::vector<Tensor> slices;
  int64_t at = 0;
  for (size_t r = 0; r < extents.size(); ++r) {
    Shape shape = mine.shape();
    shape[dim] = extents[r];
    slices.push_back(flat.slice_flat(at, shape));
    at += counts[r];
  }
  return slices;
}

std::vector<int64_t> split_sizes(int64_t extent, int ranks) {
  std::vector<int64_t> sizes(static_cast<size_t>(ranks), extent / ranks);
  for (int64_t r = 0; r < extent % ranks; ++r) ++sizes[static_cast<size_t>(r)];
  return sizes;
}

}  // namespace acc::parallel
