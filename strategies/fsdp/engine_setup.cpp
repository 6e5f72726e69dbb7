#include "engine_setup.h"

#include <algorithm>

#include "acc/autograd/grad_mode.h"
#include "acc/memory/allocator.h"
#include "acc/nn/deferred_init.h"
#include "acc/util/log.h"

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

// The tier units keep their master shard, its gradient and the optimizer state in. With
// offload_dir, the file tier's directory is checked now, with room for this rank's master
// shard, its gradient and two f32 states (AdamW's), so that an unwritable path or a full disk
// stops the job before it starts.
memory::Tier offload_tier(const FsdpConfig& c, const models::Model& model, int shard_size) {
  if (!c.offload_dir.empty()) {
    int64_t numel = 0;
    for (const auto& [_, p] : model.named_parameters()) numel += p.numel();
    memory::set_file_tier_dir(c.offload_dir, 4 * 4 * (numel / shard_size + 1));
    return memory::Tier::file;
  }
  return c.offload_params ? memory::Tier::offload : memory::Tier::compute;
}

}  // namespace

void prepare_model(models::Model& model, const Config& config, dist::ProcessGroup& world) {
  const FsdpConfig& fsdp = config.dist.fsdp;
  warn_unapplied(fsdp);
  const bool deferred = nn::has_deferred_parameters(model);
  if (fsdp.cpu_ram_efficient_loading && !deferred)
    log::warn("fsdp_config.fsdp_cpu_ram_efficient_loading: the model was built with its memory "
              "(not by acc::make_model or inside nn::DeferredInit), so every rank holds it whole "
              "until it is sharded");
  if (fsdp.sync_module_states && deferred) {
    log::info("fsdp_config.fsdp_sync_module_states: the parameters are initialised on their "
              "shards, the same on every rank; nothing to broadcast");
  } else if (fsdp.sync_module_states) {  // rank 0's values everywhere, before anything is sharded
    autograd::NoGradGuard no_grad;
    for (auto& [_, p] : model.named_parameters()) world.broadcast(p, 0);
  }
  model.set_compute_dtype(config.compute.bf16 ? DType::bf16 : DType::f32);
}

EngineOptions engine_options(const Config& config, const models::Model& model, EngineLayout layout) {
  const FsdpConfig& fsdp = config.dist.fsdp;
  return EngineOptions{.strategy = std::move(layout.strategy),
                       .groups = std::move(layout.groups),
                       .replicated_groups = std::move(layout.replicated_groups),
                       .reshard_after_forward = layout.reshard_after_forward,
                       .compute_dtype = config.compute.bf16 ? DType::bf16 : DType::f32,
                       .activation_checkpointing = fsdp.activation_checkpointing,
                       .checkpoint_classes = fsdp.activation_checkpointing_cls,
                       .reduce_bf16 = fsdp.reduce_bf16,
                       .forward_prefetch = fsdp.forward_prefetch,
                       .backward_prefetch = fsdp.backward_prefetch,
                       .offload_tier = offload_tier(fsdp, model, layout.shard_size),
                       .vocab_parallel = fsdp.vocab_parallel,
                       // f32 elements; any positive size holds one at least
                       .bucket_numel = fsdp.bucket_mb > 0
                                           ? std::max<int64_t>(static_cast<int64_t>(fsdp.bucket_mb * (1 << 20)) / 4, 1)
                                           : 0,
                       .quantize_block = fsdp.quantize_weights ? fsdp.quantize_block : 0,
                       .gradient_wire = {.block = fsdp.quantize_gradients ? fsdp.quantize_block : 0,
                                         .bits = fsdp.quantize_gradients ? fsdp.quantize_gradients : 8},
                       .node_copies = layout.node_copies};
}

}  // namespace acc::fsdp
