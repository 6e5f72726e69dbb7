#include "acc/accelerate/sharded_model.h"

namespace acc {

ShardedModel::ShardedModel(std::string type_name, std::shared_ptr<models::Model> module)
    : models::Model(std::move(type_name)), module_(std::move(module)) {
  ACC_CHECK(module_, "ShardedModel: the model to wrap is null");
  register_module("module", module_);
}

void ShardedModel::set_compute_dtype(DType) {
  ACC_FAIL(type_name(), ": mixed precision belongs to the strategy; set config.compute.bf16 ",
           "(mixed_precision: bf16 in the config file) before acc::accelerate()");
}

}  // namespace acc
