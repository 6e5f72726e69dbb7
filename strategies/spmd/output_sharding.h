#pragma once
// FSDPv2's shard_output: the sharding a causal LM's logits [B, T, V] have when forward returns
// them. The engine leaves them split on the batch over `fsdp` (each fsdp rank computes its own
// samples) and, where tensor parallelism splits the head over the vocabulary, on the last dim
// over `model`. The spec asked for (config.dist.spmd.shard_output; unset: FSDPv2's default,
// [fsdp, null, null]) decides which of those splits are gathered:
//
//   dim 0   fsdp: this rank's samples      null: every sample (gathered over fsdp)
//   last    model: this rank's vocabulary  null: the whole vocabulary (gathered over model)
//
// Other dims stay whole. Inside summon_full_params the head is whole again, and so are the
// logits over the vocabulary, whatever the spec says of the last dim. The gathers are
// differentiable: a loss computed from gathered logits trains as one process on the whole
// batch would (the batch gather's gradient is scaled by the fsdp size, which the engine's
// averaging of gradients over fsdp undoes).
#include <memory>

#include "acc/config/config.h"
#include "acc/distributed/mesh.h"
#include "acc/tensor/tensor.h"

namespace acc::spmd {

class OutputSharding {
 public:
  // `vocab_split`: the head is split over the vocabulary across `model`.
  OutputSharding(OutputShardingCallable shard_output, std::shared_ptr<Mesh> mesh, bool vocab_split);
  // The logits as the spec asks; an error names shard_output, the spec and what it supports.
  // `head_joined`: summon_full_params has joined the head (the logits are whole already).
  Tensor apply(const Tensor& logits, bool head_joined) const;

 private:
  OutputShardingCallable shard_output_;
  std::shared_ptr<Mesh> mesh_;
  bool vocab_split_;
};

}  // namespace acc::spmd
