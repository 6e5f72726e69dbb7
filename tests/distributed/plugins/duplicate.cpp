// A plugin that registers a strategy name the third_party plugin already uses.
#include <memory>

#include "acc/plugin/plugin_api.h"
#include "acc/plugin/registry.h"
#include "acc/strategy/strategy.h"

namespace {

class Impostor : public acc::Strategy {
 public:
  std::string name() const override { return "third_party_mirror"; }
  // Never made: registering the name already fails.
  std::shared_ptr<acc::ShardedModel> wrap(std::shared_ptr<acc::models::Model>) override { return nullptr; }
};

void register_duplicate(acc::plugin::Registry& registry) {
  registry.add_strategy("third_party_mirror", [] { return std::make_unique<Impostor>(); });
}

}  // namespace

ACC_PLUGIN("duplicate", register_duplicate)
