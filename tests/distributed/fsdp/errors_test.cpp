// Bad input to acc::accelerate is one clear error naming the thing and what was expected.
#include <gtest/gtest.h>

#include "fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

data::DataLoader any_loader() { return data::DataLoader(make_dataset("gpt2", 8), {.batch_size = 4}); }

TEST(AccelerateErrors, UnknownStrategyListsTheRegisteredOnes) {
  Config config;
  config.dist.strategy = "ZERO_INFINITY";
  const std::string error = error_of([&] { accelerate(make_model("gpt2"), any_loader(), config); });
  EXPECT_NE(error.find("strategy 'ZERO_INFINITY' is not registered"), std::string::npos) << error;
  for (const char* known : {"FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "HYBRID_SHARD_ZERO2"})
    EXPECT_NE(error.find(known), std::string::npos) << error;
}

TEST(AccelerateErrors, WrapClassMatchingNothingListsTheModuleTypes) {
  Config config;
  config.dist.distributed_type = DistributedType::FSDP;
  config.dist.fsdp.wrap_layer_cls = {"LlamaDecoderLayer"};
  const std::string error = error_of([&] { accelerate(make_model("gpt2"), any_loader(), config); });
  EXPECT_NE(error.find("fsdp_transformer_layer_cls_to_wrap: class 'LlamaDecoderLayer' matches no "
                       "module of GPT2LMHeadModel"), std::string::npos) << error;
  EXPECT_NE(error.find("GPT2Block"), std::string::npos) << error;
}

TEST(AccelerateErrors, InvalidConfigIsRejectedBeforeAnyStrategyStarts) {
  Config config;
  config.dist.distributed_type = DistributedType::FSDP;
  config.dist.fsdp.auto_wrap_policy = WrapPolicy::SIZE_BASED_WRAP;
  config.dist.fsdp.auto_wrap_policy_set = true;
  const std::string error = error_of([&] { accelerate(make_model("gpt2"), any_loader(), config); });
  EXPECT_NE(error.find("fsdp_min_num_params"), std::string::npos) << error;
}

TEST(AccelerateErrors, MixedPrecisionBelongsToTheConfig) {
  auto [sharded, loader] = accelerate(make_model("mlp"), data::DataLoader(make_dataset("mlp", 8), {.batch_size = 4}), Config{});
  const std::string error = error_of([&] { sharded->set_compute_dtype(DType::bf16); });
  EXPECT_NE(error.find("config.compute.bf16"), std::string::npos) << error;
}

TEST(AccelerateErrors, ShardSizeThatDoesNotDivideTheJob) {
  if (world().size() == 1) GTEST_SKIP() << "needs more than one rank";
  Config config;
  config.dist.distributed_type = DistributedType::FSDP;
  config.dist.fsdp.size = world().size() + 1;
  const std::string error = error_of([&] { accelerate(make_model("mlp"), any_loader(), config); });
  EXPECT_NE(error.find("fsdp_config.fsdp_size"), std::string::npos) << error;
}

}  // namespace
}  // namespace acc::test
