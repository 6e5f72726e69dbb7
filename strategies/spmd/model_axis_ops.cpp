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

}  // namespace acc::spmd
