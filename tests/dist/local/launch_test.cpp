#include <gtest/gtest.h>

#include <algorithm>

#include "error_matchers.h"
#include "launch_command.h"
#include "rank_output.h"

using namespace acc::cli;

namespace {
bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
}  // namespace

TEST(Launch, ParsesOptionsAndProgram) {
  const auto o = parse_launch_args({"--num_processes=3", "--dry_run", "prog", "--lr", "1"});
  EXPECT_EQ(o.num_processes, 3);
  EXPECT_TRUE(o.dry_run);
  EXPECT_EQ(o.program, (std::vector<std::string>{"prog", "--lr", "1"}));
  EXPECT_EQ(parse_launch_args({"--num_processes", "2", "--", "--weird"}).program,
            (std::vector<std::string>{"--weird"}));
}

TEST(Launch, BadArgumentsAreNamed) {
  EXPECT_ACC_ERROR(parse_launch_args({"--num_processes", "0", "p"}), {"--num_processes '0'"});
  EXPECT_ACC_ERROR(parse_launch_args({"--num_processes"}), {"--num_processes needs a value"});
  EXPECT_ACC_ERROR(parse_launch_args({"--config_file", "/no/such.yaml", "p"}),
                   {"--config_file '/no/such.yaml' is not a file"});
  EXPECT_ACC_ERROR(parse_launch_args({"--bogus", "p"}), {"unknown option '--bogus'"});
  EXPECT_ACC_ERROR(resolve_launch(parse_launch_args({"--fsdp_sharding_strategy", "HALF", "p"})),
                   {"--fsdp_sharding_strategy HALF", "allowed"});
  EXPECT_ACC_ERROR(parse_launch_args({"--num_processes", "2"}), {"no program to launch"});
}

TEST(Launch, ConfigKeysOverrideTheFile) {
  const auto r = resolve_launch(parse_launch_args(
      {"--config_file", ACC_SOURCE_DIR "/configs/fsdp_full_shard.yaml", "--mixed_precision", "bf16",
       "--fsdp_sharding_strategy=SHARD_GRAD_OP", "--num_processes", "3", "prog"}));
  EXPECT_TRUE(r.config.compute.bf16);
  EXPECT_EQ(r.config.dist.fsdp.sharding_strategy, acc::ShardingStrategy::SHARD_GRAD_OP);
  EXPECT_EQ(r.num_processes, 3);
  EXPECT_NE(r.source.find("+ --mixed_precision bf16"), std::string::npos) << r.source;
}

TEST(Launch, AnFsdpKeyMakesADefaultConfigFsdp) {
  ::setenv("ACC_CONFIG_HOME", "/nonexistent-acc-config-home", 1);
  const auto r = resolve_launch(parse_launch_args({"--fsdp_sharding_strategy", "SHARD_GRAD_OP", "prog"}));
  ::unsetenv("ACC_CONFIG_HOME");
  EXPECT_EQ(r.config.strategy_name(), "SHARD_GRAD_OP");
}

TEST(Launch, OversubscribesOnlyBeyondCoresAndAllowsRootOnlyForRoot) {
  LaunchOptions o;
  o.program = {"prog"};
  const auto over = mpirun_args(o, 4, 2, false);
  EXPECT_TRUE(has(over, "--oversubscribe"));
  EXPECT_FALSE(has(over, "--allow-run-as-root"));
  EXPECT_TRUE(has(over, "--tag-output"));
  const auto fit = mpirun_args(o, 2, 4, true);
  EXPECT_FALSE(has(fit, "--oversubscribe"));
  EXPECT_TRUE(has(fit, "slot:PE=2"));  // each rank gets its share of cores
  EXPECT_TRUE(has(fit, "--allow-run-as-root"));
  EXPECT_EQ(fit.back(), "prog");
}

TEST(Launch, RewritesMpirunTagsToRankPrefixes) {
  const auto line = parse_tagged_line("[1,12]<stderr>:loss 3.5 [x]");
  ASSERT_TRUE(line);
  EXPECT_EQ(line->rank, 12);
  EXPECT_TRUE(line->is_stderr);
  EXPECT_EQ(rank_prefixed(*line), "[rank 12] loss 3.5 [x]");
  EXPECT_EQ(parse_tagged_line("[1,0]<stdout>:")->text, "");
  EXPECT_FALSE(parse_tagged_line("-----------"));
  EXPECT_FALSE(parse_tagged_line("[warn] something"));
  EXPECT_FALSE(parse_tagged_line("[1,x]<stdout>:a"));
}
