#include "spmd_strategy.h"

#include <algorithm>
#include <set>

#include "acc/distributed/single_process_group.h"
#include "acc/spmd/sharding_rules.h"
#include "acc/util/log.h"
#include "fsdp/engine_setup.h"
#include "fsdp/wrap_policy.h"
#include "output_rules.h"
#include "resolve_sharding.h"
#include "spmd_estimate.h"
#include "spmd_model.h"
#include "common/axis_names.h"

namespace acc::spmd {

namespace {

// Parameters whose spec does not use fsdp leave their units for one unit held whole on every
// fsdp rank (gradients all-reduced over the axis); returns their names with the ignored
// modules' (already whole).
std::set<std::string> keep_whole_over_fsdp(std::vector<fsdp::UnitPlan>& plans,
                                           const ResolvedSharding& sharding, models::Model& model) {
  std::set<std::string> whole;
  for (const auto& [name, spec] : sharding.parameters) {
    const auto axes = spec.axes();
    if (std::find(axes.begin(), axes.end(), parallel::kFsdpAxis) == axes.end()) whole.insert(name);
  }
  fsdp::UnitPlan replicated{"<whole over fsdp>", &model, {}, true};
  for (auto& plan : plans) {
    if (plan.replicated) {
      for (const auto& [name, _] : plan.params) whole.insert(name);
      continue;
    }
    std::erase_if(plan.params, [&](const std::pair<std::string, Tensor>& p) {
      if (!whole.count(p.first)) return false;
      replicated.params.push_back(p);
      return true;
    });
  }
  fsdp::drop_empty_units(plans);
  if (!replicated.params.empty()) plans.insert(plans.begin(), std::move(replicated));
  return whole;
}

// The engine's names of spmd_config.axis_names (torchprime's `tensor` is `model`), checked: known
// axes, the tensor-parallel one once, an fsdp one.
std::vector<std::string> engine_axes(const SpmdConfig& spmd, int processes) {
  std::vector<std::string> axes = spmd.axis_names;
  for (auto& axis : axes) {
    ACC_CHECK(axis == parallel::kFsdpAxis || axis == parallel::kModelAxis || axis == parallel::kTensorAxisAlias, "spmd_config.axis_names: '", axis,
              "' is not an axis acc's SPMD engine runs: fsdp (data parallel, parameters sharded) "
              "and model (tensor parallel; torchprime's `tensor` is another name for it)");
    axis = parallel::engine_axis(axis);
  }
  ACC_CHECK(std::count(axes.begin(), axes.end(), parallel::kModelAxis) <= 1,
            "spmd_config.axis_names: `model` and `tensor` are two names of the tensor-parallel axis; name it once");
  ACC_CHECK(std::find(axes.begin(), axes.end(), parallel::kFsdpAxis) != axes.end(),
            "spmd_config.axis_names: the mesh has no `fsdp` axis; SPMD splits batches and shards "
            "parameters over it (plain FSDPv2 is mesh_shape [", processes,
            ", 1] with axis_names [fsdp, model])");
  return axes;
}

}  // namespace

void SpmdStrategy::check_job(const Config& config, int processes) const {
  const SpmdConfig& spmd = config.dist.spmd;
  Mesh::check(spmd.mesh_shape, engine_axes(spmd, processes), processes,
              "num_processes is " + std::to_string(processes));
  if (!spmd.sharding_rules.empty()) ShardingRules::from_file(spmd.sharding_rules);  // its errors now
}

void SpmdStrategy::setup(std::shared_ptr<dist::ProcessGroup> world, const dist::Topology& topology,
                         const Config& config) {
  Strategy::setup(world, topology, config);
  mesh_ = std::make_shared<Mesh>(world, config.dist.spmd.mesh_shape, engine_axes(config.dist.spmd, world->size()));
  self_group_ = dist::self_group(*world);
}

std::shared_ptr<ShardedModel> SpmdStrategy::wrap(std::shared_ptr<models::Model> model) {
  ACC_CHECK(model, name(), ": the model to wrap is null");
  const ResolvedSharding sharding = resolve_sharding(*model, mesh_->axis_names(), config().dist.spmd.sharding_rules);
  fsdp::prepare_model(*model, config(), *world());
  const auto& model_group = mesh_->has_axis(parallel::kModelAxis) ? mesh_->group(parallel::kModelAxis) : self_group_;
  auto tensor_parallel = std::make_unique<parallel::TensorParallel>(name(), *model, sharding, model_group);
  check_output_rules(sharding, *model, *tensor_parallel, *mesh_);
  // Before any other wrapper (the engine's, the tensor-parallel ones): outermost.
  auto output_checks = check_outputs_at_calls(sharding, *model, tensor_parallel->split_layers());
  tensor_parallel->slice_parameters(*model);

  const auto& fsdp_group = mesh_->group(parallel::kFsdpAxis);
  auto plans = fsdp::plan_units(*model, config().dist.fsdp, model->structure());
  auto whole = keep_whole_over_fsdp(plans, sharding, *model);
  using Kind = ShardedModel::Placement::Kind;
  const int fsdp = fsdp_group->size();
  auto options = fsdp::engine_options(
      config(), *model,
      {.strategy = name(),
       .groups = {.shard = fsdp_group, .replicate = self_group_, .placements = {{parallel::kFsdpAxis, Kind::sharded, fsdp}}},
       .replicated_groups = {.shard = self_group_,  // whole over fsdp
                             .replicate = fsdp_group,
                             .placements = {{parallel::kFsdpAxis, Kind::replicated, fsdp}}},
       .reshard_after_forward = true,
       .shard_size = fsdp_group->size()});
  // The fsdp axis alone splits the embedding and head by rows (FSDPv2 shards dim 0), as the
  // vocabulary-parallel units do; tensor parallelism splits the head over `model` itself.
  options.vocab_parallel = options.vocab_parallel && model_group->size() == 1;
  const parallel::SplitLayers* split = tensor_parallel->split_layers();
  log::debug("SPMD: {}, {} units, {} parameters split over model{}, {} whole over fsdp", mesh_->describe(),
             plans.size(), tensor_parallel->splits().size(),
             !split ? "" : split->split() == parallel::SplitDim::sequence ? " and the layers' sequence" : " and the layers' hidden dim",
             whole.size());
  auto engine = std::make_shared<fsdp::FsdpModel>(model, std::move(plans), std::move(options));
  tensor_parallel->install();
  OutputSharding output_sharding(config().dist.spmd.shard_output, mesh_, tensor_parallel->splits_vocabulary());
  return std::make_shared<SpmdModel>(std::move(model), std::move(engine), std::move(tensor_parallel), mesh_,
                                     std::move(output_sharding), std::move(output_checks));
}

std::vector<StrategyEstimate> SpmdStrategy::estimate_memory(const estimate::ModelShape& shape,
                                                            const estimate::Workload& w, const Config& config) const {
  return estimate_rows(shape, w, config);
}

}  // namespace acc::spmd
