#pragma once
// The FSDP settings' memory per rank (the ZeRO formulas, Ψ parameters, N ranks per shard group,
// AdamW): 4Ψ/N f32 masters (+2Ψ/N bf16 copies), 4Ψ/N gradients, 8Ψ/N moments, the gathered
// units a step holds at once, and the activations of estimate/memory_estimate.h. These are the
// rows FsdpStrategy::estimate_memory gives `accelerate estimate-memory` and AUTO.
// tests/distributed/fsdp/estimate_test.cpp checks them against the allocator's measured peaks.
#include <string>
#include <vector>

#include "acc/config/config.h"
#include "acc/estimate/memory_estimate.h"
#include "acc/strategy/strategy.h"

namespace acc::fsdp {

// One way an FSDP setting runs, as far as memory goes.
struct Plan {
  ShardingStrategy strategy = ShardingStrategy::FULL_SHARD;
  bool activation_checkpointing = false;
  bool wrap_blocks = true;     // each transformer block its own unit (else one unit, the whole model)
  bool vocab_parallel = true;  // fsdp_vocab_parallel: sharded settings split embedding and head by rows
  int size = 0;                // fsdp_size; 0: the world, or the node for the hybrids
  // fsdp_offload_dir: the masters and the optimizer state in files there (Memory::on_disk);
  // empty: in memory.
  std::string offload_dir = {};
  // fsdp_reshard_after_forward: node: each block's copy sharded within the node, from its
  // forward to its backward.
  bool reshard_to_node = false;
};
std::string to_string(const Plan& plan);  // "FULL_SHARD + activation checkpointing + files in /d"

// The axes of FSDP's mesh (replicas x shard group) and how a sharded unit's pieces lie on them:
// the same piece on every replica, flat shards within the shard group.
inline const std::string kReplicateAxis = "replicate", kShardAxis = "shard";
std::vector<Placement> sharded_placements(int replicas, int shard_size);

// Ranks one shard group spans under `plan`.
int shard_group_size(const Plan& plan, const estimate::Workload& w);

// Whether fsdp_reshard_after_forward: node keeps node copies: the strategy reshards after the
// forward and its shard groups span whole nodes, more than one.
bool keeps_node_copies(ShardingStrategy strategy, int shard_size, int ranks_per_node);

estimate::Memory estimate(const estimate::ModelShape& shape, const Plan& plan, const estimate::Workload& w);

// The rows of `setting` with `config`'s FSDP options, for Strategy::estimate_memory. AUTO tries
// them least communication first: NO_SHARD, the hybrids (only when there is more than one
// node), SHARD_GRAD_OP, FULL_SHARD, then FULL_SHARD with activation checkpointing. When the
// config asks for AUTO and names an fsdp_offload_dir, that directory is where AUTO may offload:
// the rows before keep everything in memory, and the last one, FULL_SHARD with checkpointing and
// files in the directory, is tried only if the directory's free space holds every rank of the
// node's files.
std::vector<StrategyEstimate> estimate_rows(ShardingStrategy setting, const estimate::ModelShape& shape,
                                            const estimate::Workload& w, const Config& config);

}  // namespace acc::fsdp
