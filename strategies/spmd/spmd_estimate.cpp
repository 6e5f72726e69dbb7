#include "spmd_estimate.h"

#include <algorithm>

#include "common/axis_names.h"
#include "resolve_sharding.h"

namespace acc::spmd {

std::vector<StrategyEstimate> estimate_rows(const estimate::ModelShape& shape, const estimate::Workload& w,
                                            const Config& config) {
  const SpmdConfig& spmd = config.dist.spmd;
  if (!shape.deferred_model || spmd.mesh_shape.size() != spmd.axis_names.size()) return {};
  std::vector<std::string> axes = spmd.axis_names;
  int fsdp = 0, model_ranks = 1, ranks = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    axes[i] = parallel::engine_axis(axes[i]);
    ranks *= spmd.mesh_shape[i];
    if (axes[i] == parallel::kFsdpAxis) fsdp = spmd.mesh_shape[i];
    if (axes[i] == parallel::kModelAxis) model_ranks = spmd.mesh_shape[i];
  }
  if (fsdp == 0 || ranks != w.world) return {};

  const auto model = shape.deferred_model();
  const ResolvedSharding sharding = resolve_sharding(*model, axes, spmd.sharding_rules);
  // The blocks, by the types the model declares: a transformer wrap makes each one a unit, and
  // the first one's parameters are what one unit gathers.
  const auto block_types = model->structure().block_types;
  std::vector<std::string> blocks;
  for (auto& [path, module] : model->named_modules())
    if (std::ranges::find(block_types, module->type_name()) != block_types.end()) blocks.push_back(path + ".");
  auto in_block = [&](const std::string& name) {
    return std::ranges::any_of(blocks, [&](const std::string& b) { return name.starts_with(b); });
  };
  const bool per_block = config.dist.fsdp.effective_wrap_policy() != WrapPolicy::NO_WRAP && !blocks.empty();
  // Over fsdp alone the embedding and the head are split by vocabulary rows, never gathered.
  const bool vocab_parallel = config.dist.fsdp.vocab_parallel && model_ranks == 1 && fsdp > 1;
  const Shape vocab_matrix{shape.vocab, shape.hidden};

  int64_t held = 0;
  bool head_split = false;  // the embedding or head split over `model` (by vocabulary rows)
  double gathered_elements = 0;  // the sharded parameters' model slices a step holds gathered at once
  const auto params = model->named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    const auto& [name, spec] = sharding.parameters[i];
    const auto used = spec.axes();
    const bool over_fsdp = std::ranges::find(used, parallel::kFsdpAxis) != used.end();
    const bool over_model = std::ranges::find(used, parallel::kModelAxis) != used.end();
    const std::vector<Placement> placements{
        {parallel::kFsdpAxis, over_fsdp ? Placement::Kind::sharded : Placement::Kind::replicated, fsdp},
        {parallel::kModelAxis, over_model ? Placement::Kind::split : Placement::Kind::replicated, model_ranks}};
    const int64_t numel = params[i].second.numel();
    held += held_elements(numel, placements);
    const bool root = !in_block(name);
    const bool vocab_rows = root && params[i].second.shape() == vocab_matrix;  // the embedding or head
    if (over_model && vocab_rows) head_split = true;
    if (!over_fsdp || fsdp == 1) continue;   // never gathered
    if (vocab_parallel && vocab_rows) continue;
    const double slice = static_cast<double>(numel) / (over_model ? model_ranks : 1);
    // FULL_SHARD over fsdp: the root unit all step, a block and the next one in flight; with
    // one unit for the whole model, all of it.
    if (!per_block || root)
      gathered_elements += slice;
    else if (name.starts_with(blocks.front()))
      gathered_elements += 2 * slice;
  }

  estimate::Memory m = estimate::training_state(held, w.bf16);
  m.gathered = static_cast<int64_t>((w.bf16 ? 2.0 : 4.0) * gathered_elements);
  // Tensor parallelism: each model rank computes its heads, its part of the MLP's width and, with
  // the head split, its vocabulary rows, over the same tokens.
  const estimate::ModelShape computed = shape.on_model_rank(model_ranks, head_split);
  m.activations = estimate::activation_bytes(computed, w.batch / fsdp, w.seq, w.bf16,
                                             config.dist.fsdp.activation_checkpointing, vocab_parallel ? fsdp : 1);
  if (fsdp > 1 && per_block) m.activations += 4 * shape.block_parameters / model_ranks;  // the reduce window
  m.communication = estimate::communication_bytes(w);
  std::string mesh;
  for (size_t i = 0; i < axes.size(); ++i) mesh += (i ? " x " : "") + axes[i] + " " + std::to_string(spmd.mesh_shape[i]);
  return {{.plan = "SPMD (" + mesh + ")", .memory = m}};
}

}  // namespace acc::spmd
