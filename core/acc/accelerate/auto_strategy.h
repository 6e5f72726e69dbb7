#pragma once
// AUTO: the strategy chosen for a model, a batch and a memory budget, from every registered
// strategy's own estimate (Strategy::estimate_memory). Core knows no strategy here: each row a
// strategy gives says where AUTO tries it (StrategyEstimate::auto_order, least communication
// first) and which config keys choosing it sets; a plugin's rows take part like the built-in
// ones. `accelerate estimate-memory` prints the same rows and the same choice.
#include <cstdint>
#include <string>
#include <vector>

#include "acc/config/config.h"
#include "acc/data/dataloader.h"
#include "acc/estimate/model_shape.h"
#include "acc/strategy/strategy.h"

namespace acc {

// Every registered strategy's rows (every plugin of the search folders loaded) for `config`'s
// options: AUTO's candidates first, in its order, then the rows AUTO never chooses. With
// workload.save_async each row also holds the save's host copy (checkpoint), the same for all.
std::vector<StrategyEstimate> strategy_estimates(const estimate::ModelShape& shape,
                                                 const estimate::Workload& workload, const Config& config);

struct AutoChoice {
  StrategyEstimate row;
  bool fits = false;
  std::string reason;  // "NO_SHARD needs 3.1 GiB > 2.0 GiB; SHARD_GRAD_OP needs ...", for the log
};

// The first of AUTO's candidates in `rows` whose total fits `limit_bytes`; when none does, the
// candidate needing the least memory, with fits = false. An error when `rows` holds none.
AutoChoice choose_auto(const std::vector<StrategyEstimate>& rows, int64_t limit_bytes);

// What one rank may use, AUTO's budget: fsdp_memory_limit, else the rank's share of this
// machine's physical memory.
int64_t auto_memory_limit(const Config& config, int ranks_per_node);

// `config` with AUTO replaced by `row`'s strategy: its settings applied.
Config apply_auto_choice(Config config, const StrategyEstimate& row);

// The config with the strategy AUTO (fsdp_sharding_strategy: AUTO, or strategy: AUTO) replaced
// by choose_auto's choice for this model and batch within fsdp_memory_limit (default: the
// rank's share of the machine's memory). The choice and why are logged. Other configs come
// back unchanged.
Config resolve_auto_strategy(Config config, const models::Model& model, const data::DataLoader& loader);

}  // namespace acc
