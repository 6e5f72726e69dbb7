#include "acc/accelerate/auto_strategy.h"

#include <algorithm>

#include "acc/estimate/memory_estimate.h"
#include "acc/plugin/registry.h"
#include "acc/runtime/init.h"
#include "acc/util/error.h"
#include "acc/util/log.h"

namespace acc {

namespace {

// Tokens per sample, from the dataset's first sample (0 when it holds no token ids).
int64_t sequence_length(const data::DataLoader& loader) {
  if (loader.dataset().size() == 0) return 0;
  const int64_t first = 0;
  const data::Batch sample = loader.dataset().get_batch({&first, 1}, {});
  return sample.contains("input_ids") && sample["input_ids"].dim() == 2 ? sample["input_ids"].size(1) : 0;
}

}  // namespace

std::vector<StrategyEstimate> strategy_estimates(const estimate::ModelShape& shape,
                                                 const estimate::Workload& workload, const Config& config) {
  auto& registry = plugin::Registry::global();
  registry.load_all();
  std::vector<StrategyEstimate> rows;
  for (const auto& name : registry.strategy_names()) {
    auto more = registry.make_strategy(name)->estimate_memory(shape, workload, config);
    rows.insert(rows.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  }
  // The host copy an asynchronous save writes from does not depend on the strategy.
  if (workload.save_async)
    for (auto& row : rows) row.memory.checkpoint = estimate::async_checkpoint_bytes(shape, workload);
  std::stable_sort(rows.begin(), rows.end(), [](const StrategyEstimate& a, const StrategyEstimate& b) {
    return a.auto_order.value_or(INT32_MAX) < b.auto_order.value_or(INT32_MAX);
  });
  return rows;
}

AutoChoice choose_auto(const std::vector<StrategyEstimate>& rows, int64_t limit_bytes) {
  AutoChoice choice;
  const StrategyEstimate* least = nullptr;
  for (const auto& row : rows) {
    if (!row.auto_order) continue;
    const bool fits = row.memory.total() <= limit_bytes;
    choice.reason += (choice.reason.empty() ? "" : "; ") + row.plan + " needs " +
                     estimate::format_bytes(row.memory.total()) + (fits ? " <= " : " > ") +
                     estimate::format_bytes(limit_bytes);
    if (fits) {
      choice.row = row;
      choice.fits = true;
      return choice;
    }
    if (!least || row.memory.total() < least->memory.total()) least = &row;
  }
  ACC_CHECK(least, "AUTO: no registered strategy estimates this workload (strategies give AUTO rows through "
            "Strategy::estimate_memory)");
  choice.row = *least;
  return choice;
}

int64_t auto_memory_limit(const Config& config, int ranks_per_node) {
  const int64_t limit = strategy_answer(config, &OptionSection::memory_limit, int64_t{0});
  return limit > 0 ? limit : estimate::default_memory_limit(ranks_per_node);
}

Config apply_auto_choice(Config config, const StrategyEstimate& row) {
  if (config.dist.strategy == kAutoStrategy) config.dist.strategy.clear();  // the row's settings name it
  for (const auto& [key, value] : row.settings) config.set(key, value);
  return config;
}

Config resolve_auto_strategy(Config config, const models::Model& model, const data::DataLoader& loader) {
  if (!config.asks_for_auto()) return config;
  const dist::Topology& t = topology();
  const estimate::Workload w{.world = t.world_size,
                             .ranks_per_node = t.local_size,
                             .batch = loader.options().batch_size,
                             .seq = sequence_length(loader),
                             .bf16 = config.compute.bf16};
  const auto rows = strategy_estimates(estimate::ModelShape::of(model), w, config);
  AutoChoice choice = choose_auto(rows, auto_memory_limit(config, t.local_size));
  // Every rank runs rank 0's choice: budgets and free disk space may differ between machines.
  Tensor index = Tensor::from_vector(
      {static_cast<float>(std::ranges::find_if(rows, [&](const StrategyEstimate& r) { return r.plan == choice.row.plan; }) - rows.begin())},
      {1});
  world().broadcast(index, 0);
  const auto chosen = static_cast<size_t>(index.item());
  ACC_CHECK(chosen < rows.size(), "AUTO: rank 0 chose row ", chosen, " of ", rows.size(),
            "; the ranks see different strategies (are the same plugins on every machine?)");
  if (rows[chosen].plan != choice.row.plan) {
    log::info("AUTO: this rank would have chosen {}; running rank 0's choice", choice.row.plan);
    choice.row = rows[chosen];
  }
  config = apply_auto_choice(std::move(config), choice.row);
  if (choice.fits)
    log::info("AUTO chose {}: {}", choice.row.plan, choice.reason);
  else
    log::warn("AUTO: nothing fits the limit; using {}, the least memory ({})", choice.row.plan, choice.reason);
  return config;
}

}  // namespace acc
