// The PIPELINE strategy plugin: its section (pipeline_config:) and the strategy, which cuts a
// causal LM into stages over the ranks, each on one rank or on several replicas
// (pipeline_model.h).
#include <memory>

#include "acc/plugin/plugin_api.h"
#include "acc/plugin/registry.h"
#include "acc/strategy/strategy.h"
#include "acc/util/error.h"
#include "pipeline_estimate.h"
#include "pipeline_model.h"
#include "pipeline_options.h"
#include "stages.h"

namespace acc::pipeline {
namespace {

class PipelineStrategy : public Strategy {
 public:
  std::string name() const override { return kStrategy; }
  std::shared_ptr<ShardedModel> wrap(std::shared_ptr<models::Model> model) override {
    return std::make_shared<PipelineModel>(std::move(model), world(), read_options(config()));
  }
  void check_job(const Config& config, int processes) const override { checked_grid(read_options(config), processes); }
  // Each rank gives its own stage's deferred parameters their values (pipeline_model.cpp).
  bool initialises_deferred_parameters() const override { return true; }
  // The stage that needs the most memory; over several machines also AUTO's candidate, a stage
  // per node (pipeline_estimate.h).
  std::vector<StrategyEstimate> estimate_memory(const estimate::ModelShape& shape, const estimate::Workload& w,
                                                const Config& config) const override {
    return estimate_rows(shape, w, config);
  }
  // The stages of one replica run the same samples; the replicas of a stage different ones.
  int data_parallel_rank() const override { return grid().replica; }
  int data_parallel_size() const override { return grid().replicas; }

 private:
  StageGrid grid() const {
    const PipelineOptions o = read_options(config());
    return stage_grid(o.stages, o.tensor_parallel, world()->size(), world()->rank());
  }
};

void register_pipeline(plugin::Registry& registry) {
  registry.add_option_section(option_section());
  registry.add_strategy(kStrategy, [] { return std::make_unique<PipelineStrategy>(); });
}

}  // namespace
}  // namespace acc::pipeline

ACC_PLUGIN("pipeline", acc::pipeline::register_pipeline)
