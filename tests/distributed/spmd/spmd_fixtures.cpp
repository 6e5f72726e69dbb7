#include "spmd_fixtures.h"

#include "support/test_support.h"

namespace acc::test {

Config spmd_config(const std::string& kind, std::vector<int> shape, const std::string& rules, bool bf16) {
  Config config;
  config.dist.distributed_type = DistributedType::SPMD;
  config.dist.spmd.mesh_shape = std::move(shape);
  config.dist.spmd.axis_names = {"fsdp", "model"};
  config.dist.spmd.sharding_rules = rules.empty() ? "" : rules_path(rules);
  config.dist.fsdp.wrap_layer_cls = block_classes(kind);
  config.compute.bf16 = bf16;
  return config;
}

std::vector<int> fsdp_tp_mesh() {
  const int n = world().size();
  const int model = n >= 2 ? 2 : 1;
  return {n / model, model};
}

Config fsdp_tp_config(const std::string& kind, bool bf16) {
  return spmd_config(kind, fsdp_tp_mesh(), kind + "-fsdp-tp.yaml", bf16);
}

std::string rules_path(const std::string& file) {
  return std::string(ACC_SOURCE_DIR) + "/configs/sharding/" + file;
}

}  // namespace acc::test
