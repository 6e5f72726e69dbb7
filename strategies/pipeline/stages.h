#pragma once
// How the PIPELINE strategy cuts a causal LM's chain (models::Structure::Chain) into stages:
// contiguous runs of layers, the embedding on the first stage, the final norm and the head on
// the last; and which stages hold each parameter (a tied head's weight: the first and the last).
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "acc/models/model.h"
#include "acc/models/structure.h"

namespace acc::pipeline {

// Where a rank sits among `stages` pipeline stages, each run by `replicas` data-parallel replicas
// of `tensor_parallel` ranks each, stage-major and tensor-parallel ranks innermost: a stage's
// ranks are neighbours (on one node, when a node holds a whole stage), so the stages' messages
// are what crosses nodes, not the replicas' gathers or the tensor-parallel sums.
struct StageGrid {
  int stages = 1, replicas = 1, tensor_parallel = 1;
  int stage = 0, replica = 0, model = 0;  // model: the rank's place among the tensor-parallel ones
};
// `stages` 0: one per `tensor_parallel` ranks. Errors name pipeline_config.stages or
// pipeline_config.tensor_parallel.
StageGrid stage_grid(int stages, int tensor_parallel, int world, int rank);

struct StagePlan {
  // Per stage, the chain's units [begin, end) it runs: its layers, or with parts > 1 the layers'
  // residual branches (Structure::Chain::branches; unit u is branch u % parts of layer u / parts).
  std::vector<std::pair<int64_t, int64_t>> units;
  int parts = 1;
  int stages() const { return static_cast<int>(units.size()); }
  int stage_of_unit(int64_t unit) const;
};

// Contiguous stages of at least one unit each whose largest cost is the least possible: a unit
// costs `unit_costs[i]`, the first stage `first_cost` more, the last `last_cost` more (costs in
// any unit proportional to compute: parameters used in products). With more stages than `ranks`
// (interleaved: virtual stage k runs on rank k % ranks; 0: a rank per stage) a rank's work is
// the sum of its stages, and the plan makes the busiest rank's sum the least possible first, the
// largest stage second, and of such plans takes the one whose cuts come first. `split_at`, when
// not empty, gives the first unit of every stage after the first instead. The plan's parts stay
// 1; the caller sets them.
StagePlan plan_stages(const std::vector<int64_t>& unit_costs, int64_t first_cost, int64_t last_cost, int stages,
                      const std::vector<int64_t>& split_at = {}, int ranks = 0);

// The plan for a model whose parameters and their element counts are `parameters`.
// `split_points` are
// - ["auto"] (or none): whole layers balanced by products: each layer costs its parameters plus
//   `layer_attention` (its attention's products, in the same units: FLOPs per token / 2), the
//   last stage the head's weight (`head_weight`, used in a product per token), the embedding
//   nothing (a lookup);
// - the names of the units where each stage after the first begins: a layer, or a residual
//   branch of one by a module of it (transformer.h.6.mlp, or its ln_2: the branch begins at its
//   first module), which cuts the chain by branches.
// Errors name pipeline_config.split_points or the number of processes.
// `ranks`: as plan_stages'.
StagePlan plan_model_stages(const models::Structure::Chain& chain,
                            const std::vector<std::pair<std::string, int64_t>>& parameters,
                            const std::string& head_weight, int stages,
                            const std::vector<std::string>& split_points, int64_t layer_attention = 0, int ranks = 0);
// The plan as the log shows it: each stage's first and last unit, a branch by the layer's name
// and its last module ("0: transformer.h.0 .. transformer.h.7.attn; 1: transformer.h.7.mlp ..").
std::string describe(const models::Structure::Chain& chain, const StagePlan& plan);

// A causal LM's parameters as a plan needs them: its chain, every parameter's name and element
// count in order, which one is the head's weight, and what a layer's attention adds to its
// products at the model's longest sequence (from Model::train_flops_per_token).
struct ChainParameters {
  models::Structure::Chain chain;
  std::vector<std::pair<std::string, int64_t>> sizes;
  std::string head;
  int64_t layer_attention = 0;
};
// plan_model_stages for `parameters`.
StagePlan plan_model_stages(const ChainParameters& parameters, int stages, const std::vector<std::string>& split_points,
                            int ranks = 0);
// What `auto` balances, for each stage of a whole-layer `plan`: its layers' parameters used in
// products per token and their attention, and on the last stage the head's weight.
std::vector<int64_t> stage_costs(const ChainParameters& parameters, const StagePlan& plan);
ChainParameters chain_parameters(models::CausalLM& lm);

// Unit `unit` of `plan` on x: its layer, or its branch of the layer (x + the branch's modules
// run in turn on x, as the layer's forward computes it).
Tensor run_unit(models::CausalLM& lm, const models::Structure::Chain& chain, const StagePlan& plan, int64_t unit,
                const Tensor& x);

// The stages (ascending) that hold each parameter: its layer's, the first for the embedding's,
// the last for the head's (both for a tied one). A parameter outside the chain is an error
// naming it.
std::map<std::string, std::vector<int>> holders(const models::Structure::Chain& chain, const StagePlan& plan,
                                                const std::vector<std::pair<std::string, int64_t>>& parameters);
// The same by pipeline rank: virtual stage k runs on rank k % ranks (ascending, each once).
std::map<std::string, std::vector<int>> rank_holders(std::map<std::string, std::vector<int>> stage_holders, int ranks);

}  // namespace acc::pipeline
