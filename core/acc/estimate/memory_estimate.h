#pragma once
// Per-rank memory of a training step, by the allocator's categories, before running it: what
// `accelerate estimate-memory` prints and what fsdp_sharding_strategy: AUTO chooses with.
//
// Model state follows the ZeRO formulas (Ψ parameters, N ranks per shard group, AdamW):
// 4Ψ/N f32 masters (+2Ψ/N bf16 copies), 4Ψ/N gradients, 8Ψ/N moments. Gathered units are the
// compute-dtype copies a step holds at once. Activations follow what acc's GPT-2 and Llama ops
// save for backward (measured per op, see memory_estimate.cpp), plus the largest transient of
// the backward. tests/distributed/fsdp/estimate_test.cpp checks the numbers against the allocator's
// measured peaks.
#include <cstdint>
#include <string>
#include <vector>

#include "acc/config/config.h"
#include "acc/estimate/model_shape.h"

namespace acc::estimate {

struct Workload {
  int world = 1;            // ranks
  int ranks_per_node = 1;   // the hybrids shard within a node
  int64_t batch = 0;        // global batch (samples); each rank gets batch / world
  int64_t seq = 0;          // tokens per sample
  bool bf16 = false;
  bool wrap_blocks = true;  // each transformer block its own unit (else one unit, the whole model)
  bool vocab_parallel = true;  // fsdp_vocab_parallel: sharded strategies split embedding and head by rows
  bool save_async = false;     // checkpoint::save_async: a host copy of the state while it writes
};

struct Plan {
  ShardingStrategy strategy = ShardingStrategy::FULL_SHARD;
  bool activation_checkpointing = false;
};
std::string to_string(const Plan& plan);  // "FULL_SHARD + activation checkpointing"

// Bytes per rank by the allocator's categories. parameters, gradients and optimizer_state are
// held between steps; gathered and activations are the highest during a step; checkpoint is the
// host copy an asynchronous save writes from (Workload::save_async).
struct Memory {
  int64_t parameters = 0, gradients = 0, optimizer_state = 0, gathered = 0, activations = 0,
          communication = 0, checkpoint = 0;
  int64_t total() const {
    return parameters + gradients + optimizer_state + gathered + activations + communication + checkpoint;
  }
};

struct Estimate : Memory {
  Plan plan;
};

// Ranks one shard group spans for `strategy`.
int shard_group_size(ShardingStrategy strategy, const Workload& w);

// Peak activation bytes of one rank's forward + backward (0 for Family::other). With
// vocab_ranks > 1 the embedding and head are split by vocabulary rows over that many ranks
// (fsdp_vocab_parallel), which exchange the hidden states instead of gathering the weights.
int64_t activation_bytes(const ModelShape& shape, int64_t batch_per_rank, int64_t seq, bool bf16,
                         bool activation_checkpointing,
                         int vocab_ranks = 1);

Estimate estimate(const ModelShape& shape, const Plan& plan, const Workload& w);
// The host copy of an asynchronous save (SHARDED_STATE_DICT) per rank, whatever the strategy:
// the f32 masters and AdamW's two moments, 12Ψ bytes, written once over all the ranks (replicas
// take turns), so 12Ψ/world. It lives while the next step runs, until the write has finished.
int64_t async_checkpoint_bytes(const ModelShape& shape, const Workload& w);
// What the comm backend holds per rank whatever the strategy (its staging buffers).
int64_t communication_bytes(const Workload& w);

// The plans AUTO tries, least communication first: NO_SHARD, the hybrids when there is more
// than one node, SHARD_GRAD_OP, FULL_SHARD, then FULL_SHARD with activation checkpointing.
std::vector<Plan> candidate_plans(const Workload& w);

struct Choice {
  Estimate estimate;
  bool fits = false;
  std::string reason;  // one line per plan tried, for the log
};

// The first candidate whose total fits `limit_bytes`; when none does, the last one (least
// memory), with fits = false.
Choice choose(const ModelShape& shape, const Workload& w, int64_t limit_bytes);

// The rank's share of this machine's physical memory.
int64_t default_memory_limit(int ranks_per_node);

std::string format_bytes(int64_t bytes);  // "1.23 GiB", "512.0 MiB", "12 KiB"

}  // namespace acc::estimate
