#include "fsdp_estimate.h"

#include <algorithm>
#include <filesystem>

#include "acc/memory/allocator.h"

namespace acc::fsdp {

namespace {

// Where AUTO tries each plan: the least communication first (StrategyEstimate::auto_order),
// files last.
int auto_order(const Plan& plan) {
  switch (plan.strategy) {
    case ShardingStrategy::NO_SHARD: return 100;
    case ShardingStrategy::HYBRID_SHARD_ZERO2: return 200;
    case ShardingStrategy::HYBRID_SHARD: return 300;
    case ShardingStrategy::SHARD_GRAD_OP: return 400;
    default: return !plan.offload_dir.empty() ? 700 : plan.activation_checkpointing ? 600 : 500;
  }
}

}  // namespace

std::string to_string(const Plan& plan) {
  std::string out = acc::to_string(plan.strategy);
  if (plan.activation_checkpointing) out += " + activation checkpointing";
  if (!plan.offload_dir.empty()) out += " + files in " + plan.offload_dir;
  if (plan.reshard_to_node) out += " + node copies";
  return out;
}

std::vector<Placement> sharded_placements(int replicas, int shard_size) {
  return {{kReplicateAxis, Placement::Kind::replicated, replicas}, {kShardAxis, Placement::Kind::sharded, shard_size}};
}

int shard_group_size(const Plan& plan, const estimate::Workload& w) {
  if (plan.strategy == ShardingStrategy::NO_SHARD) return 1;
  if (plan.size > 0) return std::min(plan.size, w.world);
  if (is_hybrid(plan.strategy)) return std::min(w.world, std::max(1, w.ranks_per_node));
  return w.world;
}

bool keeps_node_copies(ShardingStrategy strategy, int shard_size, int ranks_per_node) {
  const int node = std::max(1, ranks_per_node);
  return reshards_after_forward(strategy) && shard_size > node && shard_size % node == 0;
}

estimate::Memory estimate(const estimate::ModelShape& s, const Plan& plan, const estimate::Workload& w) {
  using estimate::Family;
  const int n = shard_group_size(plan, w);
  const int64_t held = held_elements(s.parameters, sharded_placements(std::max(1, w.world / n), n));
  estimate::Memory e = estimate::training_state(held, w.bf16);
  const double compute_elem = w.bf16 ? 2.0 : 4.0;
  if (!plan.offload_dir.empty()) {  // the f32 masters, their gradients and both moments live in files
    e.on_disk = 16 * held;
    e.parameters -= 4 * held;
    e.gradients = 0;
    e.optimizer_state = 0;
  }
  // Split by vocabulary rows, the embedding and head are never gathered (fsdp_vocab_parallel).
  const bool split_vocab = plan.vocab_parallel && n > 1 && s.family != Family::other;
  const double vocab_matrices =
      split_vocab ? static_cast<double>(s.vocab * s.hidden) * (s.family == Family::gpt2 ? 1 : 2) : 0.0;
  const bool per_block = plan.wrap_blocks && s.layers > 0;
  if (n > 1) {
    // FULL_SHARD holds the root unit for the whole step and a block plus the next one in flight;
    // SHARD_GRAD_OP keeps everything it gathered until the block's backward.
    const double units = !per_block || !reshards_after_forward(plan.strategy)
                             ? static_cast<double>(s.parameters) - vocab_matrices
                             : static_cast<double>(s.root_parameters() + 2 * s.block_parameters) - vocab_matrices;
    e.gathered = static_cast<int64_t>(compute_elem * units);
    // hpZ: every block's node copy, held between its forward and its backward.
    if (plan.reshard_to_node && per_block && keeps_node_copies(plan.strategy, n, w.ranks_per_node))
      e.gathered += static_cast<int64_t>(compute_elem * static_cast<double>(s.layers * s.block_parameters) /
                                         std::max(1, w.ranks_per_node));
  }
  const int64_t per_rank_batch = w.batch / std::max(1, w.world);
  e.activations = estimate::activation_bytes(s, per_rank_batch, w.seq, w.bf16, plan.activation_checkpointing,
                                             split_vocab ? n : 1);
  // Gradient reductions run while the backward goes on, holding up to one block's f32
  // gradients (FSDP's reduce window).
  if (w.world > 1 && per_block) e.activations += 4 * s.block_parameters;
  e.communication = estimate::communication_bytes(w);
  // With state in files the allocator keeps freed blocks up to a cap it fills with what a step
  // frees and asks for again: its gathered units and activations.
  if (!plan.offload_dir.empty())
    e.allocator_cache = std::min(memory::file_tier_cache_bytes(w.ranks_per_node), e.gathered + e.activations);
  return e;
}

std::vector<StrategyEstimate> estimate_rows(ShardingStrategy setting, const estimate::ModelShape& shape,
                                            const estimate::Workload& w, const Config& config) {
  const FsdpConfig& f = config.dist.fsdp;
  // The hybrids differ from FULL_SHARD and SHARD_GRAD_OP only across nodes.
  if (is_hybrid(setting) && !(w.world > w.ranks_per_node && w.ranks_per_node > 1)) return {};
  // Under AUTO the directory is where AUTO may offload, last: the other rows keep it unused.
  const bool offload_last = config.asks_for_auto() && !f.offload_dir.empty();
  const Plan plan{.strategy = setting,
                  .activation_checkpointing = f.activation_checkpointing,
                  .wrap_blocks = f.effective_wrap_policy() != WrapPolicy::NO_WRAP,
                  .vocab_parallel = f.vocab_parallel,
                  .size = f.size,
                  .offload_dir = offload_last ? "" : f.offload_dir,
                  .reshard_to_node = f.reshard_to_node};
  auto row = [&](const Plan& p) {
    StrategyEstimate r{.plan = to_string(p), .memory = estimate(shape, p, w), .auto_order = auto_order(p)};
    r.settings = {{"distributed_type", "FSDP"}, {"fsdp_config.fsdp_sharding_strategy", acc::to_string(p.strategy)}};
    if (p.activation_checkpointing && !f.activation_checkpointing)
      r.settings.emplace_back("fsdp_config.fsdp_activation_checkpointing", "true");
    if (offload_last && p.offload_dir.empty()) r.settings.emplace_back("fsdp_config.fsdp_offload_dir", "\"\"");
    return r;
  };
  std::vector<StrategyEstimate> rows{row(plan)};
  if (setting != ShardingStrategy::FULL_SHARD) return rows;
  // AUTO's last resorts, when nothing else fits: FULL_SHARD keeping only each block's input,
  // then with the masters, gradients and optimizer state in files.
  Plan checkpointed = plan;
  checkpointed.activation_checkpointing = true;
  if (!plan.activation_checkpointing) rows.push_back(row(checkpointed));
  if (offload_last) {
    checkpointed.offload_dir = f.offload_dir;
    StrategyEstimate files = row(checkpointed);
    // Every rank of the node writes its files there.
    const int64_t needed = files.memory.on_disk * std::max(1, w.ranks_per_node);
    std::error_code ec;
    const auto space = std::filesystem::space(f.offload_dir, ec);
    if (ec || static_cast<int64_t>(space.available) < needed) {
      files.auto_order.reset();
      files.plan += ec ? " (not usable: " + ec.message() + ")"
                       : " (needs " + estimate::format_bytes(needed) + " free, has " +
                             estimate::format_bytes(static_cast<int64_t>(space.available)) + ")";
    }
    rows.push_back(std::move(files));
  }
  return rows;
}

}  // namespace acc::fsdp
