#include "fsdp_strategy.h"

#include "acc/autograd/grad_mode.h"
#include "acc/dist/single_process_group.h"
#include "acc/dist/subgroups.h"
#include "acc/memory/allocator.h"
#include "acc/nn/deferred_init.h"
#include "acc/util/log.h"
#include "fsdp_model.h"

namespace acc::fsdp {

namespace {

// Options a config may carry that this engine does not act on yet: said once, never dropped
// silently.
void warn_unapplied(const FsdpConfig& c) {
  auto warn = [](const char* key) {
    log::warn("fsdp_config.{}: not implemented by acc's FSDP engine yet; ignored", key);
  };
  // acc always keeps the original parameters, as views into the flat buffer.
  if (!c.use_orig_params) warn("fsdp_use_orig_params");
  if (!c.flatten_parameters) warn("flatten_parameters");
}

// The tier units keep their master shard and optimizer state in. With offload_dir, the file
// tier's directory is checked now, with room for this rank's master shard and two f32 states
// (AdamW's), so that an unwritable path or a full disk stops the job before it starts.
memory::Tier offload_tier(const FsdpConfig& c, const models::Model& model, int shard_size) {
  if (!c.offload_dir.empty()) {
    int64_t numel = 0;
    for (const auto& [_, p] : model.named_parameters()) numel += p.numel();
    memory::set_file_tier_dir(c.offload_dir, 3 * 4 * (numel / shard_size + 1));
    return memory::Tier::file;
  }
  return c.offload_params ? memory::Tier::offload : memory::Tier::compute;
}

}  // namespace

void FsdpStrategy::setup(std::shared_ptr<dist::ProcessGroup> world,
                         const dist::Topology& topology, const Config& config) {
  Strategy::setup(world, topology, config);
  const int n = world->size();
  const int size = config.dist.fsdp.size;
  if (setting_ == ShardingStrategy::NO_SHARD)
    shard_size_ = 1;
  else if (size > 0)
    shard_size_ = size;
  else
    shard_size_ = is_hybrid(setting_) ? topology.local_size : n;
  ACC_CHECK(shard_size_ <= n && n % shard_size_ == 0, "fsdp_config.fsdp_size: ", name(),
            " shards over groups of ", shard_size_, " ranks, which does not divide the ", n,
            " ranks of the job", is_hybrid(setting_) ? " (hybrid: ranks per node, see ACC_RANKS_PER_NODE)" : "");
  // Row-major mesh [replicas, shard]: shard groups are consecutive ranks (one node).
  const std::vector<int> mesh{n / shard_size_, shard_size_};
  shard_group_ = dist::mesh_axis_group(*world, mesh, 1);
  replicate_group_ = dist::mesh_axis_group(*world, mesh, 0);
  self_group_ = std::make_shared<dist::SingleProcessGroup>(world->name() + "/self", world->world_ranks()[world->rank()]);
}

std::shared_ptr<ShardedModel> FsdpStrategy::wrap(std::shared_ptr<models::Model> model) {
  ACC_CHECK(model, name(), ": the model to wrap is null");
  const FsdpConfig& fsdp = config().dist.fsdp;
  warn_unapplied(fsdp);
  const bool deferred = nn::has_deferred_parameters(*model);
  if (fsdp.cpu_ram_efficient_loading && !deferred)
    log::warn("fsdp_config.fsdp_cpu_ram_efficient_loading: the model was built with its memory "
              "(not by acc::make_model or inside nn::DeferredInit), so every rank holds it whole "
              "until it is sharded");
  if (fsdp.sync_module_states && deferred) {
    log::info("fsdp_config.fsdp_sync_module_states: the parameters are initialised on their "
              "shards, the same on every rank; nothing to broadcast");
  } else if (fsdp.sync_module_states) {  // rank 0's values everywhere, before anything is sharded
    autograd::NoGradGuard no_grad;
    for (auto& [_, p] : model->named_parameters()) world()->broadcast(p, 0);
  }
  const bool bf16 = config().compute.bf16;
  model->set_compute_dtype(bf16 ? DType::bf16 : DType::f32);  // the loss's gradient dtype
  auto plans = plan_units(*model, fsdp, model->shared_parameters());
  EngineOptions options{name(), {shard_group_, replicate_group_}, {self_group_, world()},
                        reshards_after_forward(setting_),
                        bf16 ? DType::bf16 : DType::f32, fsdp.activation_checkpointing,
                        fsdp.activation_checkpointing_cls, fsdp.reduce_bf16,
                        fsdp.forward_prefetch, fsdp.backward_prefetch,
                        offload_tier(fsdp, *model, shard_size_)};
  log::debug("{}: {} units, shard groups of {} ranks, {} replicas", name(), plans.size(),
             shard_size_, replicate_group_->size());
  return std::make_shared<FsdpModel>(std::move(model), std::move(plans), std::move(options));
}

}  // namespace acc::fsdp
