#pragma once
// What the FSDP tests share: small models of the three families, synthetic datasets, and the
// single-process reference run every strategy is compared with.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "acc/acc.h"

namespace acc::test {

// "mlp", "gpt2", "llama" ("llama_odd_vocab": 3 more tokens, 515): the tiny architectures (tied head, GQA, pre-norm blocks) at 64 wide,
// 2 layers and a 512-token vocabulary ("gpt2_deep", "llama_deep": 5 layers, "_deeper": 9, for pipelines). At tiny's own size (50257-token vocabulary) one case
// takes 5-9 s at 4 oversubscribed ranks, 2.5 minutes for the suite; the engine's paths are
// the same.
std::shared_ptr<models::Model> make_model(const std::string& kind, uint64_t seed = 0);
// The wrap class of the family's blocks (none for the MLP, which shards as one unit).
std::vector<std::string> block_classes(const std::string& kind);
// FSDP with `strategy` ("FULL_SHARD", ...) wrapping the family's blocks, f32 or bf16.
Config strategy_config(const std::string& strategy, const std::string& kind, bool bf16 = false);
// `config` with its master shards, their gradients and the optimizer state offloaded to `tier`
// (fsdp_offload_params; for the file tier also fsdp_offload_dir, one directory under the
// temporary one for every rank and test: each file is its own and unlinked at once), or not
// offloaded for Tier::compute.
Config offloading(Config config, memory::Tier tier);
// PIPELINE (one stage per rank) with `schedule` ("GPipe", "1F1B"), `microbatches` and
// `split_points` ("auto" or layer names, comma-separated).
Config pipeline_config(const std::string& schedule = "1F1B", int microbatches = 4,
                       const std::string& split_points = "auto");
// A dataset the family's forward accepts: random token windows or random images.
std::shared_ptr<const data::Dataset> make_dataset(const std::string& kind, int64_t samples);
// Random token windows of `seq` tokens below `vocab` (input_ids and the shifted labels).
std::shared_ptr<const data::Dataset> make_token_dataset(int64_t samples, int64_t vocab, int64_t seq);

// The ranks of one shard group under `strategy` in these tests (ACC_RANKS_PER_NODE=2 in the
// multi-rank runs makes the hybrid ones shard over pairs).
int shard_ranks(ShardingStrategy strategy);

// True when `strategy` splits the family's token embedding and head by vocabulary rows
// (fsdp_vocab_parallel, on by default): a language model on a shard group of several ranks.
bool splits_vocab(const std::string& kind, const std::string& strategy);

// f32 parameters after a few AdamW steps against one process. Without a split vocabulary the
// runs differ in the order of gradient additions only (relative 1e-7), which Adam's division
// by sqrt(v) amplifies where a gradient is near zero: within 1e-5 relative + 5e-6 (observed
// 2.6e-6 on 1 of 8192 elements, NO_SHARD Llama at 4 ranks on an AVX2-only EPYC). With it, the
// hidden states' gradient is summed from each rank's vocabulary rows as well: gradients still
// agree within 1e-5 normwise (vocab_parallel_test.cpp), but an element that nearly cancels
// moves by a few percent of lr more over 3 steps (observed 2.3e-5 on 1 of 8192 elements), as
// in SPMD's tensor parallelism: within 5e-5, still 20x below what one wrong slice moves (lr).
float f32_param_atol(const std::string& kind, const std::string& strategy);

struct RunResult {
  std::vector<float> losses;  // the global batch's mean loss per step
  std::vector<float> norms;   // the gradient norm before clipping, per step: Adam and clipping
                              // hide a gradient's scale, this does not
  std::vector<std::pair<std::string, std::vector<float>>> params;  // after the last step
};

inline constexpr double kLr = 1e-3, kWeightDecay = 0.1, kMaxNorm = 0.5;
// The runs compared differ in the order of f32 additions. Adam divides a step by the gradient's
// own scale, so with its usual eps (1e-8) a gradient at rounding level (~1e-9) moves a parameter
// by up to a whole learning rate, either way: one element in thousands then differs by ~lr
// between runs that agree everywhere else, depending on the initial values. With eps 1e-6 such a
// gradient moves it by ~1e-3 lr, and every gradient above 1e-6 is compared as Adam scales it.
inline constexpr optim::AdamWOptions kAdam{.lr = kLr, .eps = 1e-6};

// `steps` AdamW steps with clipping through acc::accelerate on the world. Losses are averaged
// over the data-parallel ranks, parameters gathered whole. `seq` > 0: a language model's
// windows are that long instead of 16 tokens.
RunResult run_accelerated(const std::string& kind, const Config& config, int64_t steps,
                          int64_t global_batch, int64_t seq = 0);
// The same steps on this process alone, on whole global batches, without any strategy: a
// plain model, optim::AdamW over its parameters (the same decay rule), optim::clip_grad_norm.
RunResult run_single_process(const std::string& kind, int64_t steps, int64_t global_batch, int64_t seq = 0);
// One process through the engine (NO_SHARD on a group of its own): what a plain bf16 run is,
// since mixed precision is the strategy's.
RunResult run_one_rank(const std::string& kind, const Config& config, int64_t steps,
                       int64_t global_batch);

// Each allocator category's peak during the last of `steps` AdamW steps with clipping (the
// model `wrap` makes, over `loader`), above what was live before the model existed.
struct MemoryPeaks {
  int64_t parameters = 0, gradients = 0, optimizer = 0, activations = 0, communication = 0, total = 0;
};
MemoryPeaks measure_step(const std::function<std::shared_ptr<ShardedModel>()>& wrap,
                         const data::DataLoader& loader, int64_t steps);
// A failure unless `estimated` is within `tolerance` (relative) of `measured`.
void expect_within(int64_t measured, int64_t estimated, double tolerance, const std::string& what);

// The same names, shapes and values, exactly, in the same order (a failure per difference).
void expect_same_parameters(const std::vector<std::pair<std::string, Tensor>>& got,
                            const std::vector<std::pair<std::string, Tensor>>& want);

}  // namespace acc::test
