#pragma once
// Which modules become FSDP units (the auto wrap policy), as Hugging Face accelerate and
// PyTorch FSDP choose them:
//   TRANSFORMER_BASED_WRAP  every module whose type name is in the class list (GPT2Block, ...)
//   SIZE_BASED_WRAP         bottom-up, every module whose not-yet-wrapped parameters reach
//                           min_num_params
//   NO_WRAP                 none
//   a callable (C++)        every module it returns true for; it decides instead of the above
// The root always is a unit too, holding every parameter no other unit took. Units may nest:
// an inner unit's parameters belong to it, not to the unit around it. Ignored modules
// (fsdp_ignored_modules) form one more unit that is never sharded, only replicated.
#include <string>
#include <utility>
#include <vector>

#include "acc/config/config.h"
#include "acc/models/structure.h"
#include "acc/nn/module.h"

namespace acc::fsdp {

struct UnitPlan {
  std::string name;      // the module's qualified name ("" for the root)
  nn::Module* module;    // whose call boundary the unit hooks (the root model for the root)
  std::vector<std::pair<std::string, Tensor>> params;  // qualified names in the root model
  bool replicated = false;  // the ignored modules' unit: whole on every rank
  int64_t row_numel = 0;    // > 0: shards are whole rows this long (vocabulary-parallel units)
};

// The replicated unit first (if any modules are ignored), then units in module registration
// order, the root last. A class name or ignored module that matches no module is an error
// listing what the model has. TRANSFORMER_BASED_WRAP naming no class wraps the structure's
// blocks; its shared parameters stay in the root, which is gathered for the whole step.
std::vector<UnitPlan> plan_units(nn::Module& root, const FsdpConfig& config, const models::Structure& structure);

// Drops the wrapped units a strategy left without parameters after moving some out of them
// (vocabulary units, SPMD's whole-over-fsdp unit): they have nothing to gather. The root (last)
// stays, and so does a replicated unit.
void drop_empty_units(std::vector<UnitPlan>& plans);

}  // namespace acc::fsdp
