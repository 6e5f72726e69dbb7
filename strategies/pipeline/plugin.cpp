// The PIPELINE strategy plugin: its section (pipeline_config:) and the strategy, which cuts a
// causal LM into one stage per rank (pipeline_model.h).
#include <memory>

#include "acc/plugin/plugin_api.h"
#include "acc/plugin/registry.h"
#include "acc/strategy/strategy.h"
#include "acc/util/error.h"
#include "pipeline_model.h"
#include "pipeline_options.h"

namespace acc::pipeline {
namespace {

class PipelineStrategy : public Strategy {
 public:
  std::string name() const override { return kStrategy; }
  std::shared_ptr<ShardedModel> wrap(std::shared_ptr<models::Model> model) override {
    return std::make_shared<PipelineModel>(std::move(model), world(), read_options(config()));
  }
  // Each rank gives its own stage's deferred parameters their values (pipeline_model.cpp).
  bool initialises_deferred_parameters() const override { return true; }
  // Every stage runs the same batch: one data-parallel replica.
  int data_parallel_rank() const override { return 0; }
  int data_parallel_size() const override { return 1; }
};

void register_pipeline(plugin::Registry& registry) {
  registry.add_option_section(option_section());
  registry.add_strategy(kStrategy, [] { return std::make_unique<PipelineStrategy>(); });
}

}  // namespace
}  // namespace acc::pipeline

ACC_PLUGIN("pipeline", acc::pipeline::register_pipeline)
