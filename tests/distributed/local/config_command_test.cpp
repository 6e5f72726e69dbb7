// accelerate config: the dialogue driven from a string, defaults, and validate.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "acc/util/error.h"
#include "config_command.h"

using namespace acc;
using namespace acc::cli;

namespace {

Config answer(const std::string& lines, const Machine& m, std::string* transcript = nullptr) {
  std::istringstream in(lines);
  std::ostringstream out;
  Config c = ask_config(in, out, m);
  if (transcript) *transcript = out.str();
  return c;
}

}  // namespace

TEST(ConfigCommand, EmptyAnswersTakeTheMachineAwareDefaults) {
  const Config c = answer(std::string(16, '\n'), {.cores = 4, .native_bf16 = true});
  EXPECT_EQ(c.dist.num_processes, 4);
  EXPECT_EQ(c.dist.distributed_type, DistributedType::FSDP);
  EXPECT_EQ(c.dist.fsdp.sharding_strategy, ShardingStrategy::FULL_SHARD);
  EXPECT_EQ(c.dist.fsdp.effective_wrap_policy(), WrapPolicy::TRANSFORMER_BASED_WRAP);
  EXPECT_TRUE(c.dist.fsdp.wrap_layer_cls.empty());  // the blocks the model declares
  EXPECT_TRUE(c.compute.bf16);
  EXPECT_FALSE(answer(std::string(16, '\n'), {.cores = 2, .native_bf16 = false}).compute.bf16);
}

TEST(ConfigCommand, ABadAnswerIsExplainedAndAskedAgain) {
  std::string transcript;
  const Config c = answer("two\n2\nFSDP\nHALF\n2\nSIZE_BASED_WRAP\n5000\n\nmaybe\nno\n\n\n\n\n\nno\n",
                          {.cores = 2, .native_bf16 = true}, &transcript);
  EXPECT_NE(transcript.find("bad answer 'two': expected a whole number >= 1"), std::string::npos) << transcript;
  EXPECT_NE(transcript.find("HALF"), std::string::npos);
  EXPECT_NE(transcript.find("FULL_SHARD"), std::string::npos) << "the allowed values are listed";
  EXPECT_NE(transcript.find("bad answer 'maybe': allowed: yes, no"), std::string::npos);
  EXPECT_EQ(c.dist.fsdp.sharding_strategy, ShardingStrategy::SHARD_GRAD_OP);
  EXPECT_EQ(c.dist.fsdp.effective_wrap_policy(), WrapPolicy::SIZE_BASED_WRAP);
  EXPECT_EQ(c.dist.fsdp.min_num_params, 5000);
  EXPECT_FALSE(c.compute.bf16);
  // What it writes loads back as the same config.
  EXPECT_EQ(Config::from_yaml(c.to_yaml()), c);
}

TEST(ConfigCommand, OffloadAsksForADirectoryOnlyWhenChosen) {
  // processes, type, strategy, wrap, classes, backward and forward prefetch, offload, then the
  // directory, state dict, sync, loading, checkpointing, precision.
  const Machine m{.cores = 2, .native_bf16 = true};
  const Config files = answer("2\nFSDP\n\n\n\n\n\nyes\n/var/tmp/acc-offload\n\n\n\n\n\n", m);
  EXPECT_TRUE(files.dist.fsdp.offload_params);
  EXPECT_EQ(files.dist.fsdp.offload_dir, "/var/tmp/acc-offload");
  EXPECT_EQ(Config::from_yaml(files.to_yaml()), files);
  const Config memory = answer("2\nFSDP\n\n\n\n\n\nyes\n\n\n\n\n\n\n", m);
  EXPECT_TRUE(memory.dist.fsdp.offload_params);
  EXPECT_EQ(memory.dist.fsdp.offload_dir, "");
  std::string transcript;
  answer(std::string(16, '\n'), m, &transcript);
  EXPECT_EQ(transcript.find("file-backed offload"), std::string::npos) << "asked without offload";
}

TEST(ConfigCommand, OneProcessSkipsTheFsdpQuestions) {
  const Config c = answer("1\n\nno\n", {.cores = 2, .native_bf16 = true});
  EXPECT_EQ(c.dist.distributed_type, DistributedType::NO);
  EXPECT_FALSE(c.compute.bf16);
}

TEST(ConfigCommand, EndOfInputIsAnError) {
  EXPECT_THROW(answer("2\n", {.cores = 2}), Error);
}

TEST(ConfigCommand, DefaultFollowsTheMachine) {
  const Config c = default_config({.cores = 8, .native_bf16 = false});
  EXPECT_EQ(c.dist.num_processes, 8);
  EXPECT_FALSE(c.compute.bf16);
  EXPECT_NO_THROW(c.validate());
  EXPECT_EQ(default_config({.cores = 1, .native_bf16 = true}).dist.distributed_type, DistributedType::NO);
}

TEST(ConfigCommand, ValidateListsEveryProblem) {
  const auto dir = std::filesystem::temp_directory_path() / "acc_config_validate_test";
  std::filesystem::create_directories(dir);
  const auto bad = dir / "bad.yaml";
  std::ofstream(bad) << "distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: HALF\n";
  const auto problems = check_config(bad.string()).problems;
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].find("fsdp_config.fsdp_sharding_strategy"), std::string::npos) << problems[0];
  // Warnings and accepted keys are notes: the file is still valid, as launch runs with it.
  const auto warned = dir / "warned.yaml";
  std::ofstream(warned) << "distributed_type: NO\ngpu_ids: all\ncompute_environment: AMAZON_SAGEMAKER\n";
  const ConfigCheck check = check_config(warned.string());
  EXPECT_TRUE(check.problems.empty());
  ASSERT_EQ(check.notes.size(), 2u);
  EXPECT_NE(check.notes[0].find("warning: config key 'compute_environment'"), std::string::npos) << check.notes[0];
  EXPECT_NE(check.notes[1].find("do not apply to acc, accepted: gpu_ids"), std::string::npos) << check.notes[1];
  EXPECT_TRUE(check_config(ACC_SOURCE_DIR "/configs/fsdp_full_shard.yaml").problems.empty());
  std::filesystem::remove_all(dir);
}

// What every rank would stop on is refused before any starts: a strategy no plugin registers, a
// mesh or pipeline stages that do not fit num_processes, a rules file that is not there. The
// shipped configs pass.
TEST(ConfigCommand, ValidateRefusesWhatTheRanksWould) {
  const auto dir = std::filesystem::temp_directory_path() / "acc_config_launchable_test";
  std::filesystem::create_directories(dir);
  const std::vector<std::pair<std::string, std::string>> cases{
      {"strategy: PIPLINE\n", "strategy 'PIPLINE' is not registered; known strategies: ["},
      {"strategy: PIPELINE\nnum_processes: 2\npipeline_config:\n  stages: 3\n",
       "pipeline_config.stages: 3 stages do not divide the 2 processes"},
      {"strategy: PIPELINE\nnum_processes: 2\npipeline_config:\n  stages_per_rank: 2\n",
       "pipeline_config.stages_per_rank: 2 stages per rank need schedule interleaved_1F1B"},
      {"strategy: PIPELINE\nnum_processes: 2\npipeline_config:\n  microbatches: 20000\n",
       "pipeline_config.microbatches: 20000 microbatches through 2 stages are more messages"},
      {"distributed_type: SPMD\nnum_processes: 2\nspmd_config:\n  mesh_shape: [2, 2]\n  axis_names: [fsdp, model]\n",
       "Mesh: shape (2, 2) holds 4 ranks but num_processes is 2"},
      {"distributed_type: SPMD\nnum_processes: 2\nspmd_config:\n  mesh_shape: [2, 1]\n  axis_names: [fsdp, model]\n"
       "  sharding_rules: " + (dir / "absent.yaml").string() + "\n",
       "absent.yaml"},
  };
  for (const auto& [text, expected] : cases) {
    const auto file = dir / "job.yaml";
    std::ofstream(file) << text;
    const auto problems = check_config(file.string()).problems;
    ASSERT_EQ(problems.size(), 1u) << text;
    EXPECT_EQ(problems[0].rfind(file.string() + ": ", 0), 0u) << problems[0];
    EXPECT_NE(problems[0].find(expected), std::string::npos) << problems[0];
  }
  const auto here = std::filesystem::current_path();
  std::filesystem::current_path(ACC_SOURCE_DIR);  // where a rules file's path starts, as for launch
  for (const char* shipped :
       {"pipeline_1f1b.yaml", "pipeline_fsdp.yaml", "pipeline_tp.yaml", "spmd_fsdp_tp.yaml", "spmd_gpt2_fsdp_tp.yaml"})
    EXPECT_TRUE(check_config(std::string("configs/") + shipped).problems.empty()) << shipped;
  std::filesystem::current_path(here);
  std::filesystem::remove_all(dir);
}

namespace {

// accelerate config update adds what a file lacks and keeps the user's lines, comments included.
TEST(ConfigCommand, UpdateAddsMissingKeysAndKeepsComments) {
  const std::string old_file =
      "# my cluster's config\n"
      "distributed_type: FSDP  # sharded\n"
      "fsdp_config:\n"
      "  # half the ranks' memory\n"
      "  fsdp_sharding_strategy: SHARD_GRAD_OP\n"
      "\n"
      "  fsdp_transformer_layer_cls_to_wrap: GPT2Block\n"
      "mixed_precision: bf16\n";
  const acc::Config c = acc::Config::from_yaml(old_file);
  const std::string updated = acc::cli::add_missing_keys(old_file, c.to_yaml());
  // Every old line is still there, in order.
  size_t at = 0;
  std::istringstream lines(old_file);
  for (std::string line; std::getline(lines, line);) {
    at = updated.find(line, at);
    ASSERT_NE(at, std::string::npos) << "lost: " << line << "\n" << updated;
  }
  // The missing keys are added, section keys inside their section, and nothing changed meaning.
  const YAML::Node node = YAML::Load(updated);
  EXPECT_TRUE(node["num_processes"]) << updated;
  EXPECT_TRUE(node["fsdp_config"]["fsdp_reduce_dtype"]) << updated;
  EXPECT_LT(updated.find("fsdp_reduce_dtype"), updated.find("mixed_precision: bf16")) << updated;
  const acc::Config again = acc::Config::from_yaml(updated);
  EXPECT_EQ(again.dist, c.dist);
  EXPECT_EQ(again.compute, c.compute);
  // A file that has every key is left as it was.
  EXPECT_EQ(acc::cli::add_missing_keys(updated, c.to_yaml()), updated);
}

}  // namespace
