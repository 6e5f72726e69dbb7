#include "pipeline_estimate.h"

#include <algorithm>
#include <optional>
#include <set>

#include "acc/models/model.h"
#include "acc/ops/loss.h"
#include "common/structure_sharding.h"
#include "pipeline_options.h"
#include "stages.h"

namespace acc::pipeline {

std::vector<estimate::Memory> stage_memory(const estimate::ModelShape& shape, const estimate::Workload& w,
                                           const Config& config) {
  if (!shape.deferred_model || shape.family == estimate::Family::other) return {};
  const auto model = shape.deferred_model();
  auto* lm = dynamic_cast<models::CausalLM*>(model.get());
  if (!lm) return {};
  // The strategy's own checks, with its errors.
  const PipelineOptions o = read_options(config);
  const StageGrid grid = checked_grid(o, w.world);
  const int T = grid.tensor_parallel, stages = grid.stages, replicas = grid.replicas;
  const int chunks = o.stages_per_rank, virtual_stages = stages * chunks;
  const int64_t rows = w.batch / replicas;
  check_microbatches(rows, o.microbatches, replicas);
  const ChainParameters parameters = chain_parameters(*lm);
  const StagePlan plan = plan_model_stages(parameters, virtual_stages, o.split_points, stages);
  const auto held_by = rank_holders(holders(parameters.chain, plan, parameters.sizes), stages);
  const bool tied_across_stages = std::ranges::any_of(held_by, [](const auto& h) { return h.second.size() > 1; });
  // Tensor parallelism: a rank holds 1/T of each split parameter and computes its heads, its
  // part of the MLP's width and, the head split too, its vocabulary rows, over the same tokens.
  std::set<std::string> split;
  estimate::ModelShape computed = shape.on_model_rank(T, /*vocabulary_split=*/true);
  if (T > 1) {
    for (const auto& [name, spec] : parallel::structure_sharding(*model).parameters)
      if (!spec.axes().empty()) split.insert(name);
    computed.largest_block_matrix = (shape.largest_block_matrix + T - 1) / T;
  }
  const double tokens = static_cast<double>(rows / o.microbatches * w.seq);  // one microbatch's
  const auto C = static_cast<double>(shape.hidden), V = static_cast<double>(computed.vocab);
  const double block = estimate::block_bytes_per_token(computed, w.bf16, T);
  // What one microbatch's forward on virtual stage k leaves for its backward: its layers'
  // activations (a branch counted as its share of a layer), and on the last stage the loss's,
  // which makes the head's weight gradient (f32 [V, C]) and the hidden states' in its forward.
  auto layers_of = [&](int k) {
    const auto [begin, end] = plan.units[static_cast<size_t>(k)];
    return static_cast<double>(end - begin) / plan.parts;
  };
  // Under zero_bubble, what a microbatch keeps on virtual stage k from its B to its W: the
  // linears' inputs and output gradients (in the compute dtype), and on the first stage the gradient waiting for the
  // embeddings ([T, C] f32 each: GPT-2 has two, token and position).
  auto weight_part = [&](int k) {
    return tokens * layers_of(k) * estimate::weight_part_bytes_per_token(computed, w.bf16, T) +
           (k == 0 ? 4 * tokens * C * (shape.family == estimate::Family::gpt2 ? 2 : 1) : 0.0);
  };
  auto saved = [&](int k) {
    return tokens * layers_of(k) * block + (k == virtual_stages - 1
                                          ? tokens * estimate::head_bytes_per_token(computed, w.bf16) +
                                                4 * (V * C + tokens * C)
                                          : 0.0);
  };
  std::vector<estimate::Memory> out;
  for (int r = 0; r < stages; ++r) {
    int64_t whole = 0, mine = 0;  // the rank's parameter elements, and its share of them
    for (const auto& [name, numel] : parameters.sizes)
      if (std::ranges::find(held_by.at(name), r) != held_by.at(name).end()) {
        const int64_t slice = split.count(name) ? (numel + T - 1) / T : numel;
        whole += slice;
        mine += (slice + replicas - 1) / replicas;
      }
    estimate::Memory m = estimate::training_state(mine, w.bf16 && replicas == 1);
    // The step's gradients summed whole in f32, which own_step hands to the masters' .grad as
    // they are; with replicas reduced first into this rank's ranges (both exist meanwhile).
    m.gradients = 4 * whole + (replicas > 1 ? 4 * mine : 0);
    // With replicas the whole stage is gathered for the step.
    if (replicas > 1) m.gathered = (w.bf16 ? 2 : 4) * whole;
    // Walking this rank's actions: what the schedule holds plus what the action running makes
    // for a while: the loss's chunk of
    // logits (and the hidden states in bf16) in the last stage's forward; in a backward the
    // chunk's forward again under checkpointing and a block's backward (its largest weight's
    // gradient, a few [T, C] ones and, in Llama's gated MLP, the gate's and the up projection's
    // [T, I]). The embedding's rows go straight into the step's gradient sum
    // (autograd::RowGradients): no [V, C] gradient per microbatch.
    const double chunk = std::min(tokens, static_cast<double>(ops::default_loss_chunk_rows(computed.vocab)));
    const double loss = 4 * (w.bf16 ? 1.5 : 1.0) * (chunk * V + tokens * C);
    const double gated =
        shape.family == estimate::Family::llama ? 2 * tokens * static_cast<double>(computed.intermediate) : 0.0;
    const double block_backward = 4 * (static_cast<double>(computed.largest_block_matrix) + 3 * tokens * C + gated);
    double held = 0, peak = 0;
    for (const Action& a : stage_actions(o.schedule, r, stages, o.microbatches, chunks)) {
      const int k = a.chunk * stages + r;
      const bool last = k == virtual_stages - 1;
      // Checkpointing keeps the received input (the first stage embeds its ids again) and runs
      // nothing in the last stage's forward.
      const double kept = o.activation_checkpointing ? (k == 0 ? 0.0 : 4 * tokens * C) : saved(k);
      if (a.kind == Action::Kind::forward) {
        held += kept;
        peak = std::max(peak, held + (last && !o.activation_checkpointing ? loss : 0.0));
      } else if (a.kind == Action::Kind::weight) {
        // The linears' weight gradients, as their weight parts go.
        peak = std::max(peak, held + 4 * static_cast<double>(computed.largest_block_matrix));
        held -= weight_part(k);
      } else {
        const bool split = o.schedule == Schedule::zero_bubble;
        // The gradient received from the next stage and the one sent back, each [T, C].
        const double edges = 4 * tokens * C * ((last ? 0 : 1) + (k == 0 ? 0 : 1));
        const double recomputed = o.activation_checkpointing ? saved(k) : 0.0;
        const double running =
            edges + recomputed + std::max(block_backward, o.activation_checkpointing && last ? loss : 0.0);
        // Split, the layers' saved activations go as their weight parts come, a layer at a
        // time: the larger of the two is held at once.
        const double after = split ? weight_part(k) : 0.0;
        peak = std::max(peak, held - kept + std::max(kept, after) + running);
        held += after - kept;
      }
    }
    m.activations = static_cast<int64_t>(peak);
    // The backend's staging buffers, and with replicas the f32 buffer of the stage's gather
    // (before the forwards) or of its gradients' reduce-scatter (after the backwards), with the
    // reduce-scatter's scratch of one rank's range.
    // Besides, each group the strategy splits off maps a channel of its own: a replica's
    // pipeline, a stage's replicas, its tensor-parallel ranks, and the two stages of a tied head.
    m.communication = estimate::communication_bytes(w) + (replicas > 1 ? 4 * whole + 4 * mine : 0);
    if (stages < w.world) m.communication += estimate::group_channel_bytes(stages, w);
    m.communication += estimate::group_channel_bytes(replicas, w) + estimate::group_channel_bytes(T, w);
    if (tied_across_stages && (r == 0 || r == stages - 1)) m.communication += estimate::group_channel_bytes(2, w);
    out.push_back(m);
  }
  return out;
}

namespace {

// The row of the stage that needs the most under `config`'s pipeline_config; refused, with the
// strategy's error, when it would refuse the plan; none when the model declares no chain.
std::optional<StrategyEstimate> worst_stage_row(const estimate::ModelShape& shape, const estimate::Workload& w,
                                                const Config& config) {
  const PipelineOptions o = read_options(config);
  std::vector<estimate::Memory> stages;
  try {
    stages = stage_memory(shape, w, config);
  } catch (const Error& e) {
    return StrategyEstimate{.plan = "PIPELINE " + to_string(o.schedule), .refused = e.what()};
  }
  if (stages.empty()) return std::nullopt;
  const auto worst = std::ranges::max_element(stages, {}, &estimate::Memory::total);
  const int T = o.tensor_parallel, replicas = w.world / (static_cast<int>(stages.size()) * T);
  const std::string grid = std::to_string(stages.size()) + " stages" +
                           (o.stages_per_rank > 1 ? " of " + std::to_string(o.stages_per_rank) + " chunks" : "") +
                           (replicas > 1 ? " x " + std::to_string(replicas) + " replicas" : "") +
                           (T > 1 ? " x " + std::to_string(T) + " tensor-parallel" : "");
  return StrategyEstimate{.plan = "PIPELINE " + to_string(o.schedule) + " (" + grid + ", " +
                                   std::to_string(o.microbatches) + " microbatches)",
                          .memory = *worst};
}

// AUTO's pipeline for a job over several machines: a stage per node, run by the node's ranks as
// replicas, 1F1B. Only the stages' activations (and a tied head's gradient) cross machines,
// a sixth of what FULL_SHARD sends and a quarter of HYBRID_SHARD's gradient all-reduce
// (docs/performance.md: 0.94x FULL_SHARD's tokens/s with an unpaced link, where HYBRID_SHARD
// ran 0.83x; 4.0x over a slow one), so AUTO tries it right after NO_SHARD (100) and before
// the hybrids (200, 300) and the plans that gather across machines. On one machine the bubble
// costs more than the communication saved: AUTO does not try it there.
std::optional<StrategyEstimate> auto_row(const estimate::ModelShape& shape, const estimate::Workload& w,
                                         Config config) {
  const int node = std::max(1, w.ranks_per_node);
  if (w.world <= node || w.world % node != 0 || w.batch % node != 0) return std::nullopt;
  const int stages = w.world / node;
  const int64_t rows = w.batch / node;  // a replica's
  // As many microbatches as the rows allow, up to 8 a stage: the bubble shrinks, a microbatch
  // stays large enough to compute efficiently.
  int64_t micro = 1;
  for (int64_t m = 1; m <= std::min<int64_t>(rows, 8 * stages); ++m)
    if (rows % m == 0) micro = m;
  const std::vector<std::pair<std::string, std::string>> settings{
      {"strategy", kStrategy},
      {std::string(kSection) + ".schedule", "1F1B"},
      {std::string(kSection) + ".stages", std::to_string(stages)},
      {std::string(kSection) + ".tensor_parallel", "1"},
      {std::string(kSection) + ".stages_per_rank", "1"},
      {std::string(kSection) + ".microbatches", std::to_string(micro)}};
  for (const auto& [key, value] : settings)
    if (key != "strategy") config.set(key, value);
  auto row = worst_stage_row(shape, w, config);
  if (!row || !row->refused.empty()) return std::nullopt;
  row->plan += ", a stage per node";
  row->auto_order = 150;
  row->settings = settings;
  return row;
}

}  // namespace

std::vector<StrategyEstimate> estimate_rows(const estimate::ModelShape& shape, const estimate::Workload& w,
                                            const Config& config) {
  std::vector<StrategyEstimate> rows;
  // A refusal is news only to a config that runs the pipeline; to others its row shows what the
  // pipeline would hold, when it could run.
  if (auto own = worst_stage_row(shape, w, config); own && (own->refused.empty() || config.strategy_name() == kStrategy))
    rows.push_back(std::move(*own));
  if (auto candidate = auto_row(shape, w, config)) rows.push_back(std::move(*candidate));
  return rows;
}

}  // namespace acc::pipeline
