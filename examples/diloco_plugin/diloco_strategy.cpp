// The DILOCO strategy: its option section (diloco_config:), the strategy that wraps a model in
// a DilocoModel, and the plugin's entry point.
#include <memory>

#include "acc/plugin/plugin_api.h"
#include "acc/plugin/registry.h"
#include "acc/strategy/strategy.h"
#include "acc/util/error.h"
#include "diloco_model.h"

namespace diloco {
namespace {

constexpr const char* kStrategy = "DILOCO";
constexpr const char* kSection = "diloco_config";

acc::OptionSection option_section() {
  using acc::OptionType;
  return {
      .name = kSection,
      .strategies = {kStrategy},
      .options =
          {
              {.key = "inner_steps", .type = OptionType::integer, .default_value = "8", .min = 1,
               .help = "optimizer steps each rank takes alone between two outer steps (H)",
               .question = "DiLoCo: optimizer steps between synchronisations (inner steps)?"},
              {.key = "outer_lr", .type = OptionType::number, .default_value = "0.7", .min = 0,
               .help = "learning rate of the outer SGD step on the averaged outer gradient",
               .question = "DiLoCo: outer learning rate?"},
              {.key = "outer_momentum", .type = OptionType::number, .default_value = "0.9", .min = 0, .max = 1,
               .help = "momentum of the outer step (0: none)",
               .question = "DiLoCo: outer momentum?"},
              {.key = "outer_nesterov", .type = OptionType::boolean, .default_value = "true",
               .help = "Nesterov momentum for the outer step (the paper's choice)",
               .question = "DiLoCo: Nesterov outer momentum?"},
          },
      .check =
          [](const acc::OptionValues& v) {
            ACC_CHECK(v.number("outer_lr") > 0, kSection, ".outer_lr: must be > 0 (got ", v.text("outer_lr"),
                      "); 0 would never move the shared parameters");
          },
  };
}

class DilocoStrategy : public acc::Strategy {
 public:
  std::string name() const override { return kStrategy; }

  std::shared_ptr<acc::ShardedModel> wrap(std::shared_ptr<acc::models::Model> model) override {
    const acc::OptionValues v = config().section(kSection);
    const Options options{.inner_steps = v.integer("inner_steps"),
                          .outer_lr = v.number("outer_lr"),
                          .outer_momentum = v.number("outer_momentum"),
                          .nesterov = v.boolean("outer_nesterov")};
    model->set_compute_dtype(config().compute.bf16 ? acc::DType::bf16 : acc::DType::f32);
    return std::make_shared<DilocoModel>(std::move(model), world(), options);
  }

  // Every rank holds the whole model, its gradient and AdamW's two moments (16 bytes a
  // parameter, as NO_SHARD), and DiLoCo's shared parameters, outer momentum and outer gradient
  // (12 more), and the comm backend's buffers; the outer all-reduce runs in place on the outer
  // gradient.
  std::vector<acc::StrategyEstimate> estimate_memory(const acc::estimate::ModelShape& shape,
                                                     const acc::estimate::Workload& w,
                                                     const acc::Config& config) const override {
    const int64_t n = shape.parameters;
    acc::estimate::Memory m = acc::estimate::training_state(n, false);
    m.optimizer_state += 12 * n;
    m.activations = acc::estimate::activation_bytes(shape, w.batch / w.world, w.seq, w.bf16, false);
    m.communication = acc::estimate::communication_bytes(w);
    const std::string h = config.section(kSection).text("inner_steps");
    return {{.plan = std::string(kStrategy) + " (inner_steps " + h + ")", .memory = m}};
  }
};

void register_diloco(acc::plugin::Registry& registry) {
  registry.add_option_section(option_section());
  registry.add_strategy(kStrategy, [] { return std::make_unique<DilocoStrategy>(); });
}

}  // namespace
}  // namespace diloco

ACC_PLUGIN("diloco", diloco::register_diloco)
