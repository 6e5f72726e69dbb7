#pragma once
// Tensor parallelism without a rules file: the split over the `model` axis a model's own
// Structure implies (Megatron-LM's layout), for a strategy whose user gives only the number of
// ranks (pipeline_config.tensor_parallel).
#include "acc/models/model.h"
#include "acc/spmd/sharding_rules.h"

namespace acc::parallel {

// Every parameter of `model` with its spec over `model` alone: each Structure::split_together
// member on its dim (attention's q, k and v and the MLP's first projections column-parallel,
// with their biases; the output projections row-parallel), the causal LM head and the token
// embedding (one tensor when tied) over the vocabulary, everything else whole.
spmd::ResolvedSharding structure_sharding(models::Model& model);

}  // namespace acc::parallel
