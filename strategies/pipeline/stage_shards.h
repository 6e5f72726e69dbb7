#pragma once
// A pipeline stage's parameters sharded over the ranks that run the same stage on different
// data (pipeline_config.stages < ranks: a pipeline x fsdp grid). Each rank keeps 1/F of every
// parameter's elements (a contiguous range of its flattening, ceil(n / F) each) as the f32
// master the optimizer updates; gather() fills the module's whole parameters from every rank's
// ranges in one all-gather before a step's forwards, and reduce() turns the step's summed
// gradients into this rank's ranges of their mean over the F replicas in one reduce-scatter.
// Held whole for the step, as SHARD_GRAD_OP (ZeRO-2) holds them: a stage gathers once per step,
// not once per microbatch.
#include <memory>
#include <string>
#include <vector>

#include "acc/distributed/process_group.h"
#include "acc/tensor/tensor.h"

namespace acc::pipeline {

class StageShards {
 public:
  // `whole`: the module's tensors the stage computes with (f32 or bf16), in a fixed order;
  // `values`: their f32 values now (the same tensors under f32 compute).
  StageShards(std::vector<Tensor> whole, const std::vector<Tensor>& values,
              std::shared_ptr<dist::ProcessGroup> group);

  // This rank's range of parameter i: elements [begin(i), begin(i) + master(i).numel()).
  const Tensor& master(size_t i) const { return masters_[i]; }
  const Tensor& whole(size_t i) const { return whole_[i]; }
  int64_t begin(size_t i) const;

  void gather();
  // The mean over the group of each rank's `grads` (whole, f32; undefined: zero), this rank's
  // range of each.
  std::vector<Tensor> reduce(const std::vector<Tensor>& grads);

 private:
  // Elements of parameter i that rank r keeps: [per_rank_[i] * r, + count(i, r)).
  int64_t count(size_t i, int r) const;

  std::vector<Tensor> whole_;
  std::shared_ptr<dist::ProcessGroup> group_;
  std::vector<int64_t> per_rank_, offset_;  // per parameter: elements per rank, place in a rank's block
  int64_t block_ = 0;                    // a rank's block: every parameter's chunk
  Tensor shard_;                         // this rank's block, f32: the masters are views of it
  std::vector<Tensor> masters_;
};

}  // namespace acc::pipeline
