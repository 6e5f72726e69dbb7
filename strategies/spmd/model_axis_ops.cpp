#include "model_axis_ops.h"

#include "acc/autograd/function.h"
#include "acc/ops/ops.h"

namespace acc::spmd {

namespace {

// A summed copy: the group's collectives take flat tensors, and the input may be read elsewhere.
Tensor all_reduced(const Tensor& x, dist::ProcessGroup& group) {
  Tensor sum = x.clone();
  group.all_reduce(sum.view({sum.numel()}));
  return sum;
}

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

std::vector<int64_t> split_sizes(int64_t extent, int ranks) {
  std::vector<int64_t> sizes(static_cast<size_t>(ranks), extent / ranks);
  for (int64_t r = 0; r < extent % ranks; ++r) ++sizes[static_cast<size_t>(r)];
  return sizes;
}

Tensor gather_last_dim(const Tensor& x, const std::shared_ptr<dist::ProcessGroup>& group, int64_t width) {
  if (group->size() == 1) return x;
  const std::vector<int64_t> widths = split_sizes(width, group->size());
  const int64_t rows = x.numel() / x.size(-1);
  int64_t offset = 0;  // of this rank's columns
  for (int r = 0; r < group->rank(); ++r) offset += widths[static_cast<size_t>(r)];
  ACC_CHECK(x.size(-1) == widths[static_cast<size_t>(group->rank())], "gather_last_dim: this rank's ",
            x.describe(), " is not its part of a last dim ", width, " wide");
  Shape whole = x.shape();
  whole.back() = width;
  return autograd::apply_function(
      "GatherLastDim", {x},
      [group, widths, rows, whole](autograd::FunctionContext&, const std::vector<Tensor>& in) {
        std::vector<int64_t> counts;
        for (int64_t w : widths) counts.push_back(rows * w);
        Tensor gathered = Tensor::empty({rows * whole.back()}, in[0].dtype());
        group->all_gather_v(in[0].view({in[0].numel()}), gathered, counts);
        // Rank-major blocks [rows, w_r], side by side into [rows, width].
        std::vector<Tensor> parts;
        int64_t at = 0;
        for (int64_t w : widths) {
          parts.push_back(gathered.slice_flat(at, {rows, w}));
          at += rows * w;
        }
        return ops::concat(parts, 1).view(whole);
      },
      [rows, offset, mine = x.size(-1)](autograd::FunctionContext&, const Tensor& grad) -> std::vector<Tensor> {
        Shape shape = grad.shape();
        shape.back() = mine;
        return {ops::narrow(grad.view({rows, grad.size(-1)}), 1, offset, mine).view(shape)};
      });
}

}  // namespace acc::spmd
