#pragma once
// Per-rank memory of a training step, by the allocator's categories, before running it: the
// pieces every strategy's estimate is made of (Strategy::estimate_memory, which `accelerate
// estimate-memory` prints and AUTO chooses with). What a strategy holds of the model state is
// the strategy's own formula (the FSDP settings': strategies/fsdp/fsdp_estimate.h); what is
// here does not depend on the strategy: the activations acc's GPT-2 and Llama ops save for
// backward (measured per op, see memory_estimate.cpp) plus the largest transient of the
// backward, the comm backend's buffers and an asynchronous save's host copy.
// tests/distributed/fsdp/estimate_test.cpp checks the numbers against the allocator's measured
// peaks.
#include <cstdint>
#include <string>
#include <vector>

#include "acc/estimate/model_shape.h"

namespace acc::estimate {

struct Workload {
  int world = 1;            // ranks
  int ranks_per_node = 1;   // the hybrids shard within a node
  int64_t batch = 0;        // global batch (samples); each rank gets batch / world
  int64_t seq = 0;          // tokens per sample
  bool bf16 = false;
  bool save_async = false;     // checkpoint::save_async: a host copy of the state while it writes
                               // (strategy_estimates adds it to every row)
};

// Bytes per rank by the allocator's categories. parameters, gradients and optimizer_state are
// held between steps; gathered and activations are the highest during a step; checkpoint is the
// host copy an asynchronous save writes from (Workload::save_async). total() is what stays in
// memory; on_disk is what a strategy keeps in files instead (fsdp_offload_dir's masters and
// optimizer state), paged in only while used.
struct Memory {
  int64_t parameters = 0, gradients = 0, optimizer_state = 0, gathered = 0, activations = 0,
          communication = 0, checkpoint = 0;
  // Freed blocks the allocator keeps for reuse, counted where its cache is bounded to a size
  // that a step fills (plans with files: memory::file_tier_cache_bytes, at most what the step
  // frees and asks for again).
  int64_t allocator_cache = 0;
  int64_t on_disk = 0;
  int64_t total() const {
    return parameters + gradients + optimizer_state + gathered + activations + communication + checkpoint +
           allocator_cache;
  }
};

// What a rank holds between steps for `held` parameter elements (placement.h's held_elements
// summed over the parameters): f32 masters, plus their bf16 compute copies with mixed
// precision, f32 gradients and AdamW's two f32 moments (4 + 2, 4 and 8 bytes an element).
Memory training_state(int64_t held, bool bf16);

// What activation_bytes() is made of, for a strategy that runs a part of the model (a pipeline
// stage): the bytes one transformer block saves for backward per token, and what the
// embeddings' sum, the final norm and the loss save per token. With `model_ranks` > 1 a block
// is split over that many tensor-parallel ranks (and `shape` gives one rank's heads, kv width
// and intermediate size).
double block_bytes_per_token(const ModelShape& shape, bool bf16, int model_ranks = 1);
double head_bytes_per_token(const ModelShape& shape, bool bf16);
// What one block keeps per token between a split backward's two parts (autograd/split_grad.h,
// the pipeline's zero_bubble): each linear's input and the gradient of its output, both in the
// compute dtype.
double weight_part_bytes_per_token(const ModelShape& shape, bool bf16, int model_ranks = 1);
// Peak activation bytes of one rank's forward + backward (0 for Family::other). With
// vocab_ranks > 1 the embedding and head are split by vocabulary rows over that many ranks
// (fsdp_vocab_parallel), which exchange the hidden states instead of gathering the weights.
int64_t activation_bytes(const ModelShape& shape, int64_t batch_per_rank, int64_t seq, bool bf16,
                         bool activation_checkpointing,
                         int vocab_ranks = 1);

// The host copy of an asynchronous save (SHARDED_STATE_DICT) per rank, whatever the strategy:
// the f32 masters and AdamW's two moments, 12Ψ bytes, written once over all the ranks (replicas
// take turns), so 12Ψ/world. It lives while the next step runs, until the write has finished.
int64_t async_checkpoint_bytes(const ModelShape& shape, const Workload& w);
// What the comm backend holds per rank whatever the strategy (its staging buffers).
int64_t communication_bytes(const Workload& w);
// What one more process group of `ranks` that a strategy splits off maps on each of its ranks
// (its own shared-memory channel among the ranks on a node).
int64_t group_channel_bytes(int ranks, const Workload& w);

// The rank's share of this machine's physical memory.
int64_t default_memory_limit(int ranks_per_node);

std::string format_bytes(int64_t bytes);  // "1.23 GiB", "512.0 MiB", "12 KiB"

}  // namespace acc::estimate
