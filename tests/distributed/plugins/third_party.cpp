// A strategy plugin as a third party writes it: built outside plugins/, against installed
// headers only, found through ACC_PLUGIN_PATH and chosen by name. "Mirror" keeps the whole
// model on every rank and lets each rank train on its own: the smallest complete strategy.
#include <memory>

#include "acc/optim/clip_grad.h"
#include "acc/plugin/plugin_api.h"
#include "acc/plugin/registry.h"
#include "acc/strategy/strategy.h"

namespace {

class Mirrored : public acc::ShardedModel {
 public:
  explicit Mirrored(std::shared_ptr<acc::models::Model> m) : ShardedModel("Mirror", std::move(m)) {}
  acc::models::ModelOutput forward(const acc::data::Batch& batch) override {
    return module().forward(batch);
  }
  std::vector<std::pair<std::string, acc::Tensor>> named_parameters() const override {
    return module().named_parameters();
  }
  std::vector<acc::optim::ParamGroup> param_groups(double weight_decay) const override {
    acc::optim::ParamGroup group{.params = parameters(), .weight_decay = weight_decay};
    return {group};
  }
  double clip_grad_norm(double max_norm) override {
    return acc::optim::clip_grad_norm(parameters(), max_norm);
  }
};

class MirrorStrategy : public acc::Strategy {
 public:
  std::string name() const override { return "third_party_mirror"; }
  std::shared_ptr<acc::ShardedModel> wrap(std::shared_ptr<acc::models::Model> model) override {
    return std::make_shared<Mirrored>(std::move(model));
  }
  // On one rank the mirror trains exactly as one process and sends nothing, so it offers AUTO
  // a row ahead of NO_SHARD's (100): a plugin takes part in AUTO through its estimate alone.
  std::vector<acc::StrategyEstimate> estimate_memory(const acc::estimate::ModelShape& shape,
                                                     const acc::estimate::Workload& w,
                                                     const acc::Config& /*config*/) const override {
    if (w.world != 1) return {};
    acc::estimate::Memory m;
    m.parameters = 4 * shape.parameters;
    m.gradients = 4 * shape.parameters;
    m.optimizer_state = 8 * shape.parameters;
    m.activations = acc::estimate::activation_bytes(shape, w.batch, w.seq, w.bf16, false);
    return {{.plan = name(), .memory = m, .auto_order = 50, .settings = {{"strategy", name()}}}};
  }
};

void register_third_party(acc::plugin::Registry& registry) {
  registry.add_strategy("third_party_mirror", [] { return std::make_unique<MirrorStrategy>(); });
}

}  // namespace

ACC_PLUGIN("third_party", register_third_party)
