#pragma once
// SPMD's memory per rank, from the placements the sharding rules give each parameter before any
// model exists (a model with deferred parameters is resolved against the rules): a parameter
// is sharded over `fsdp` when its spec uses that axis (else whole on every fsdp rank) and split
// over `model` when its spec uses that one, so a rank holds numel / (fsdp x model) of it, or
// less divided. The training state follows (estimate::training_state); the FSDP engine over
// `fsdp` gathers the root unit and two blocks at a time, of this rank's model slices.
// Activations are FSDP's activation model over the rank's share of the batch, with the heads,
// the MLP's width and (the head split) the vocabulary rows of one `model` rank. Measured within
// 10% of the allocator, but Llama's on a (2, 2) mesh, 12% below (memory_test.cpp).
#include <vector>

#include "acc/config/config.h"
#include "acc/estimate/memory_estimate.h"
#include "acc/strategy/strategy.h"

namespace acc::spmd {

// One row when the config's mesh holds `w.world` ranks and the model is GPT-2 or Llama (whose
// parameters a deferred model names); none otherwise. AUTO never chooses it (the mesh and the
// rules are the user's decision).
std::vector<StrategyEstimate> estimate_rows(const estimate::ModelShape& shape, const estimate::Workload& w,
                                            const Config& config);

}  // namespace acc::spmd
