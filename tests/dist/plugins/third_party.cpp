// A strategy plugin as a third party writes it: built outside plugins/, against installed
// headers only, found through ACC_PLUGIN_PATH and chosen by name.
#include <memory>

#include "acc/plugin/plugin_api.h"
#include "acc/plugin/registry.h"
#include "acc/plugin/strategy.h"

namespace {

class MirrorStrategy : public acc::Strategy {
 public:
  std::string name() const override { return "third_party_mirror"; }
};

void register_third_party(acc::plugin::Registry& registry) {
  registry.add_strategy("third_party_mirror", [] { return std::make_unique<MirrorStrategy>(); });
}

}  // namespace

ACC_PLUGIN("third_party", register_third_party)
