#pragma once
// The PIPELINE strategy's row for `accelerate estimate-memory`: the stage that needs the most,
// from the same plan the strategy makes (a memoryless model's chain cut into stages), each
// stage's parameters (divided among its replicas) with their gradients and optimizer state, and
// the activations of the microbatches the schedule holds at once.
#include <vector>

#include "acc/strategy/strategy.h"

namespace acc::pipeline {

// Per rank of each pipeline rank's stages (its chunks when interleaved), in pipeline order;
// empty when the model declares no chain. A plan the strategy would refuse throws its error.
std::vector<estimate::Memory> stage_memory(const estimate::ModelShape& shape, const estimate::Workload& w,
                                           const Config& config);
// The stage that needs the most under the config's pipeline_config (a row AUTO never picks; for
// a config that runs PIPELINE, the strategy's error instead when it would refuse the options),
// and, for a job over several machines, AUTO's candidate: a stage per node, its ranks replicas.
std::vector<StrategyEstimate> estimate_rows(const estimate::ModelShape& shape, const estimate::Workload& w,
                                            const Config& config);

}  // namespace acc::pipeline
