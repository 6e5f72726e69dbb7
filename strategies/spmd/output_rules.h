#pragma once
// The module output rules of a rules file (activation sharding): what they may say, checked
// when the model is wrapped, and what only the call can tell, checked at each call.
#include <vector>

#include "acc/autograd/hooks.h"
#include "acc/models/model.h"
#include "acc/distributed/mesh.h"
#include "acc/spmd/sharding_rules.h"
#include "common/tensor_parallel.h"

namespace acc::spmd {

// The rules the engine runs: the batch over fsdp (each fsdp rank computes its own samples), and
// over `model` what the engine does anyway: the sequence (dim 1) or the hidden dim (the last) of
// a stack's layers (parallel::SplitLayers::plan checks those), the last dim of every module inside layers
// split on it, and the last dim of a column-parallel Linear's output. Every other dim whole;
// `[i]` past 0 is an error. Errors name the key, the spec, the module and its path.
void check_output_rules(const ResolvedSharding& sharding, models::Model& model,
                        const parallel::TensorParallel& tensor_parallel, const Mesh& mesh);

// Hooks each ruled module's call, outermost (install them before any other wrapper), so the
// output is the one the rest of the model sees: the rule has one entry per dim of the output,
// and inside layers that split the sequence, dim 1 holds this rank's tokens (a norm's or a
// row-parallel Linear's output) or every token (a column-parallel Linear's) as the rule says.
std::vector<autograd::HookHandle> check_outputs_at_calls(const ResolvedSharding& sharding, models::Model& model,
                                                         const parallel::SplitLayers* split);

}  // namespace acc::spmd
