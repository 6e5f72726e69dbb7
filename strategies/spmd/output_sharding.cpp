#include "output_sharding.h"

#include "acc/spmd/partition_spec.h"
#include "common/model_axis_ops.h"
#include "common/axis_names.h"

namespace acc::spmd {

OutputSharding::OutputSharding(OutputShardingCallable shard_output, std::shared_ptr<Mesh> mesh, bool vocab_split)
    : shard_output_(std::move(shard_output)), mesh_(std::move(mesh)), vocab_split_(vocab_split) {}

Tensor OutputSharding::apply(const Tensor& logits, bool head_joined) const {
  const auto rank = static_cast<size_t>(logits.dim());
  const PartitionSpec spec = shard_output_ ? shard_output_.fn(logits) : first_dim_on(parallel::kFsdpAxis, rank);
  auto check = [&](bool ok, const std::string& why) {
    ACC_CHECK(ok, "spmd shard_output: ", spec.to_string(), " for the logits ", logits.describe(), " ", why);
  };
  check(spec.rank() == rank, "has a different number of dims");
  using Axes = std::vector<std::string>;
  const Axes whole, fsdp{parallel::kFsdpAxis}, model{parallel::kModelAxis};
  check(spec.dims[0] == whole || spec.dims[0] == fsdp, "must split dim 0 (the batch) over fsdp or keep it whole");
  for (size_t d = 1; d + 1 < rank; ++d) check(spec.dims[d] == whole, "must keep every dim but the first and last whole");
  const Axes& last = spec.dims[rank - 1];
  check(last == whole || (last == model && vocab_split_),
        vocab_split_ ? "must split the last dim (the vocabulary) over model or keep it whole"
                     : "must keep the last dim whole: the head is not split over the vocabulary");
  Tensor out = logits;
  if (vocab_split_ && !head_joined && last == whole) out = parallel::gather_slices(out, -1, mesh_->group(parallel::kModelAxis));
  if (spec.dims[0] == whole) {
    const auto& group = mesh_->group(parallel::kFsdpAxis);
    out = parallel::gather_slices(out, 0, group, group->size());
  }
  return out;
}

}  // namespace acc::spmd
