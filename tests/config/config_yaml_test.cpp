// acc::Config from and to YAML: files Hugging Face accelerate writes, acc's own keys, the
// spellings accepted besides the names, round trips, and errors that name the key and the value.
#include <gtest/gtest.h>

#include "acc/config/config.h"
#include "distributed/local/error_matchers.h"
#include "support/test_support.h"

namespace acc {
namespace {

// As `accelerate config` (accelerate 0.3x) writes it for FSDP.
constexpr const char* kAccelerateFsdpFile = R"(compute_environment: LOCAL_MACHINE
debug: false
distributed_type: FSDP
downcast_bf16: 'no'
fsdp_config:
  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP
  fsdp_backward_prefetch: BACKWARD_PRE
  fsdp_cpu_ram_efficient_loading: true
  fsdp_forward_prefetch: false
  fsdp_offload_params: false
  fsdp_sharding_strategy: FULL_SHARD
  fsdp_state_dict_type: SHARDED_STATE_DICT
  fsdp_sync_module_states: true
  fsdp_transformer_layer_cls_to_wrap: GPT2Block
  fsdp_use_orig_params: true
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 2
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false
)";

FsdpConfig fsdp_of(const std::string& fsdp_lines) {
  return Config::from_yaml("fsdp_config:\n" + fsdp_lines).dist.fsdp;
}

TEST(ConfigYaml, LoadsAccelerateFsdpFile) {
  const Config c = Config::from_yaml(kAccelerateFsdpFile);
  EXPECT_EQ(c.dist.distributed_type, DistributedType::FSDP);
  EXPECT_TRUE(c.compute.bf16);
  EXPECT_EQ(c.dist.num_processes, 2);
  EXPECT_EQ(c.dist.num_machines, 1);
  EXPECT_EQ(c.dist.strategy, "");
  const FsdpConfig& f = c.dist.fsdp;
  EXPECT_EQ(f.sharding_strategy, ShardingStrategy::FULL_SHARD);
  EXPECT_EQ(f.auto_wrap_policy, WrapPolicy::TRANSFORMER_BASED_WRAP);
  EXPECT_TRUE(f.auto_wrap_policy_set);
  EXPECT_EQ(f.wrap_layer_cls, std::vector<std::string>{"GPT2Block"});
  EXPECT_EQ(f.backward_prefetch, BackwardPrefetch::BACKWARD_PRE);
  EXPECT_FALSE(f.forward_prefetch);
  EXPECT_FALSE(f.offload_params);
  EXPECT_EQ(f.state_dict_type, StateDictType::SHARDED_STATE_DICT);
  EXPECT_TRUE(f.sync_module_states);
  EXPECT_TRUE(f.cpu_ram_efficient_loading);
  EXPECT_TRUE(f.use_orig_params);
  // accelerate's keys that do not apply are accepted quietly; the ones that do are read.
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_EQ(c.not_applicable_keys,
            (std::vector<std::string>{"debug", "downcast_bf16", "main_training_function", "rdzv_backend", "tpu_env",
                                      "tpu_use_cluster", "tpu_use_sudo"}));
  EXPECT_EQ(c.dist.machine_rank, 0);
  EXPECT_ACC_ERROR(Config::from_yaml("use_cpu: maybe\n"), {"use_cpu", "true or false"});
  EXPECT_NO_THROW(c.validate());
}

// Files as Hugging Face accelerate writes them, kept in tests/config/hf_accelerate/: the example
// of its FSDP guide (docs/source/usage_guides/fsdp.md, the layer class changed to GPT2Block) and
// what `accelerate config` writes on a CPU machine for NO and MULTI_CPU. Each loads without a
// warning and is valid, so `accelerate config validate` accepts what `accelerate launch` runs.
TEST(ConfigYaml, HuggingFaceAccelerateFilesLoadQuietlyAndAreValid) {
  const std::string dir = ACC_SOURCE_DIR "/tests/config/hf_accelerate/";
  const Config guide = Config::from_file(dir + "fsdp_guide.yaml");
  EXPECT_EQ(guide.dist.distributed_type, DistributedType::FSDP);
  EXPECT_EQ(guide.dist.fsdp.sharding_strategy, ShardingStrategy::FULL_SHARD);  // written as 1
  EXPECT_TRUE(guide.dist.fsdp.offload_params);
  EXPECT_EQ(guide.dist.fsdp.wrap_layer_cls, std::vector<std::string>{"GPT2Block"});
  EXPECT_TRUE(guide.compute.bf16);
  EXPECT_EQ(guide.dist.num_processes, 2);
  const Config no = Config::from_file(dir + "no.yaml");
  EXPECT_EQ(no.strategy_name(), "NO_SHARD");
  EXPECT_EQ(no.dist.num_processes, 1);
  const Config multi_cpu = Config::from_file(dir + "multi_cpu.yaml");
  EXPECT_EQ(multi_cpu.strategy_name(), "NO_SHARD");  // data parallel, as accelerate's DDP on CPUs
  EXPECT_TRUE(multi_cpu.compute.bf16);
  for (const Config* c : {&guide, &no, &multi_cpu}) {
    EXPECT_TRUE(c->warnings.empty());
    EXPECT_FALSE(c->not_applicable_keys.empty());
    EXPECT_NO_THROW(c->validate());
  }
}

TEST(ConfigYaml, MachineRankMustNameAMachine) {
  EXPECT_ACC_ERROR(Config::from_yaml("num_machines: 2\nmachine_rank: 2\n").validate(),
                   {"machine_rank: 2 is not a machine of num_machines 2; expected 0 to 1"});
  EXPECT_EQ(Config::from_yaml("num_machines: 2\nmachine_rank: 1\n").dist.machine_rank, 1);
}

TEST(ConfigYaml, ShardingStrategyByNumberOrNameInAnyCase) {
  const ShardingStrategy by_number[] = {ShardingStrategy::FULL_SHARD, ShardingStrategy::SHARD_GRAD_OP,
                                        ShardingStrategy::NO_SHARD, ShardingStrategy::HYBRID_SHARD,
                                        ShardingStrategy::HYBRID_SHARD_ZERO2};
  for (int n = 1; n <= 5; ++n)
    EXPECT_EQ(fsdp_of("  fsdp_sharding_strategy: " + std::to_string(n)).sharding_strategy, by_number[n - 1])
        << n;
  EXPECT_EQ(fsdp_of("  fsdp_sharding_strategy: hybrid_shard_zero2").sharding_strategy,
            ShardingStrategy::HYBRID_SHARD_ZERO2);
}

TEST(ConfigYaml, SizedBasedWrapIsSizeBasedWrap) {
  const FsdpConfig f = fsdp_of("  fsdp_auto_wrap_policy: SIZED_BASED_WRAP\n  fsdp_min_num_params: 100000000");
  EXPECT_EQ(f.auto_wrap_policy, WrapPolicy::SIZE_BASED_WRAP);
  EXPECT_TRUE(f.auto_wrap_policy_set);
  EXPECT_EQ(f.min_num_params, 100000000);
}

TEST(ConfigYaml, WrapClassesAsCommaSeparatedStringOrList) {
  const std::vector<std::string> both{"GPT2Block", "LlamaDecoderLayer"};
  EXPECT_EQ(fsdp_of("  fsdp_transformer_layer_cls_to_wrap: GPT2Block,LlamaDecoderLayer").wrap_layer_cls,
            both);
  EXPECT_EQ(fsdp_of("  fsdp_transformer_layer_cls_to_wrap: GPT2Block, LlamaDecoderLayer,").wrap_layer_cls,
            both);
  EXPECT_EQ(fsdp_of("  fsdp_transformer_layer_cls_to_wrap: [GPT2Block, LlamaDecoderLayer]").wrap_layer_cls,
            both);
  const FsdpConfig f = fsdp_of("  fsdp_transformer_layer_cls_to_wrap: GPT2Block");
  EXPECT_FALSE(f.auto_wrap_policy_set);  // only fsdp_auto_wrap_policy chooses the policy
  EXPECT_EQ(f.effective_wrap_policy(), WrapPolicy::TRANSFORMER_BASED_WRAP);
}

TEST(ConfigYaml, BackwardPrefetchUnderEitherName) {
  EXPECT_EQ(fsdp_of("  fsdp_backward_prefetch: BACKWARD_POST").backward_prefetch,
            BackwardPrefetch::BACKWARD_POST);
  EXPECT_EQ(fsdp_of("  fsdp_backward_prefetch_policy: NO_PREFETCH").backward_prefetch,
            BackwardPrefetch::NO_PREFETCH);
}

TEST(ConfigYaml, ReadsAccsOwnKeys) {
  const Config c = Config::from_yaml(R"(distributed_type: SPMD
strategy: MY_PLUGIN
fsdp_config:
  fsdp_size: 2
  fsdp_reduce_dtype: bf16
  fsdp_vocab_parallel: false
  fsdp_activation_checkpointing: yes
  fsdp_state_dict_type: FULL_STATE_DICT
spmd_config:
  mesh_shape: [2, 3]
  axis_names: [fsdp, model]
  sharding_rules: configs/sharding/llama-fsdp.yaml
)");
  EXPECT_EQ(c.dist.distributed_type, DistributedType::SPMD);
  EXPECT_EQ(c.dist.strategy, "MY_PLUGIN");
  EXPECT_EQ(c.dist.fsdp.size, 2);
  EXPECT_TRUE(c.dist.fsdp.reduce_bf16);
  EXPECT_FALSE(c.dist.fsdp.vocab_parallel);
  EXPECT_TRUE(Config{}.dist.fsdp.vocab_parallel);
  EXPECT_TRUE(c.dist.fsdp.activation_checkpointing);
  EXPECT_EQ(c.dist.fsdp.state_dict_type, StateDictType::FULL_STATE_DICT);
  EXPECT_EQ(c.dist.spmd.mesh_shape, (std::vector<int>{2, 3}));
  EXPECT_EQ(c.dist.spmd.axis_names, (std::vector<std::string>{"fsdp", "model"}));
  EXPECT_EQ(c.dist.spmd.sharding_rules, "configs/sharding/llama-fsdp.yaml");
  EXPECT_TRUE(c.warnings.empty());
}

// Keys of a section the strategy does not read change nothing: a warning says so. SPMD reads
// fsdp_config too; AUTO may choose any strategy.
TEST(ConfigYaml, WarnsOfSectionsTheStrategyDoesNotRead) {
  const Config pipeline = Config::from_yaml("strategy: PIPELINE\nfsdp_config:\n  fsdp_state_dict_type: FULL_STATE_DICT\n"
                                            "pipeline_config:\n  microbatches: 2\n");
  ASSERT_EQ(pipeline.warnings.size(), 1u);
  EXPECT_EQ(pipeline.warnings[0], "fsdp_config (fsdp_state_dict_type) is not read by PIPELINE, the strategy this config "
                                  "runs (it reads pipeline_config): those keys change nothing");
  const Config fsdp = Config::from_yaml("distributed_type: FSDP\npipeline_config:\n  microbatches: 2\n");
  ASSERT_EQ(fsdp.warnings.size(), 1u);
  EXPECT_NE(fsdp.warnings[0].find("pipeline_config (microbatches) is not read by FULL_SHARD"), std::string::npos);
  EXPECT_TRUE(Config::from_yaml("distributed_type: SPMD\nfsdp_config:\n  fsdp_activation_checkpointing: true\n"
                                "spmd_config:\n  mesh_shape: [2, 1]\n  axis_names: [fsdp, model]\n")
                  .warnings.empty());
  EXPECT_TRUE(Config::from_yaml("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: AUTO\n"
                                "pipeline_config:\n  microbatches: 2\n")
                  .warnings.empty());
}

TEST(ConfigYaml, APluginsStrategyAsDistributedTypeSaysWhereItGoes) {
  EXPECT_ACC_ERROR(Config::from_yaml("distributed_type: PIPELINE\n"),
                   {"distributed_type: bad value 'PIPELINE'", "PIPELINE is a plugin's strategy: give it as "
                                                              "`strategy: PIPELINE`"});
}

TEST(ConfigYaml, AutoStrategyAndMemoryLimitInAnyUnit) {
  auto limit_of = [](const std::string& size) {
    return Config::from_yaml("fsdp_config:\n  fsdp_memory_limit: " + size + "\n").dist.fsdp.memory_limit;
  };
  EXPECT_EQ(limit_of("8GiB"), int64_t{8} << 30);
  EXPECT_EQ(limit_of("1.5 GB"), 1'500'000'000);
  EXPECT_EQ(limit_of("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(limit_of("4096"), 4096);
  EXPECT_EQ(limit_of("64kb"), 64'000);
  for (const char* bad : {"lots", "8XB", "-1GiB", "0"}) {
    EXPECT_NE(test::error_of([&] { limit_of(bad); }).find("fsdp_config.fsdp_memory_limit: bad value"), std::string::npos)
        << bad;
  }
  const Config c = Config::from_yaml("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: auto\n");
  EXPECT_EQ(c.dist.fsdp.sharding_strategy, ShardingStrategy::AUTO);
  EXPECT_EQ(to_string(ShardingStrategy::AUTO), "AUTO");
}

TEST(ConfigYaml, ActivationCheckpointingIsABoolOrClasses) {
  auto read = [](const std::string& value) {
    return Config::from_yaml("fsdp_config:\n  fsdp_activation_checkpointing: " + value + "\n").dist.fsdp;
  };
  EXPECT_TRUE(read("true").activation_checkpointing);
  EXPECT_TRUE(read("true").activation_checkpointing_cls.empty());
  EXPECT_EQ(read("[GPT2MLP, GPT2Block]").activation_checkpointing_cls,
            (std::vector<std::string>{"GPT2MLP", "GPT2Block"}));
  EXPECT_EQ(read("GPT2MLP,LlamaMLP").activation_checkpointing_cls, (std::vector<std::string>{"GPT2MLP", "LlamaMLP"}));
  EXPECT_FALSE(read("GPT2MLP").activation_checkpointing);
}

TEST(ConfigYaml, MultiCpuIsAPlainRunWithoutWarning) {
  const Config c = Config::from_yaml("distributed_type: MULTI_CPU\nnum_processes: 4\n");
  EXPECT_EQ(c.dist.distributed_type, DistributedType::NO);
  EXPECT_EQ(c.dist.num_processes, 4);
  EXPECT_TRUE(c.warnings.empty());
}

TEST(ConfigYaml, WarnsOnOtherComputeEnvironmentAndFsdpVersion) {
  EXPECT_TRUE(Config::from_yaml("fsdp_config:\n  fsdp_version: 1\n").warnings.empty());
  const Config c =
      Config::from_yaml("compute_environment: AMAZON_SAGEMAKER\nfsdp_config:\n  fsdp_version: 2\n");
  ASSERT_EQ(c.warnings.size(), 2u);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "'compute_environment' = 'AMAZON_SAGEMAKER'", c.warnings[0]);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "'fsdp_config.fsdp_version' = 2", c.warnings[1]);
}

TEST(ConfigYaml, EmptyFileAndNullValuesKeepTheDefaults) {
  EXPECT_EQ(Config::from_yaml(""), Config{});
  EXPECT_EQ(Config::from_yaml("main_process_ip: null\nnum_processes:\nfsdp_config:\n"), Config{});
  EXPECT_EQ(Config::from_yaml("fsdp_config: {}\nspmd_config: {}\n"), Config{});
}

TEST(ConfigYaml, UnknownKeyIsNamedWithItsSectionAndTheKnownKeys) {
  EXPECT_ACC_ERROR(
      Config::from_yaml("num_procs: 2\n"),
      {"<yaml>: unknown key 'num_procs'", "known top-level keys:", "num_processes", "fsdp_config"});
  EXPECT_ACC_ERROR(Config::from_yaml("fsdp_config:\n  fsdp_foo: 1\n"),
                   {"<yaml>: unknown key 'fsdp_config.fsdp_foo'",
                    "known fsdp_config keys:", "fsdp_min_num_params", "fsdp_transformer_layer_cls_to_wrap"});
  EXPECT_ACC_ERROR(
      Config::from_yaml("spmd_config:\n  mesh: [2]\n"),
      {"unknown key 'spmd_config.mesh'", "known spmd_config keys: axis_names, mesh_shape, sharding_rules"});
}

TEST(ConfigYaml, BadEnumValueNamesKeyValueAndAllowedValues) {
  EXPECT_ACC_ERROR(Config::from_yaml("fsdp_config:\n  fsdp_state_dict_type: LOCAL_STATE_DICT\n"),
                   {"<yaml>: fsdp_config.fsdp_state_dict_type: bad value 'LOCAL_STATE_DICT'",
                    "allowed: SHARDED_STATE_DICT, FULL_STATE_DICT"});
  EXPECT_ACC_ERROR(
      Config::from_yaml("fsdp_config:\n  fsdp_sharding_strategy: 6\n"),
      {"fsdp_config.fsdp_sharding_strategy: bad value '6'", "FULL_SHARD", "HYBRID_SHARD_ZERO2", "5"});
  EXPECT_ACC_ERROR(Config::from_yaml("distributed_type: MULTI_GPU\n"),
                   {"distributed_type: bad value 'MULTI_GPU'", "allowed: NO, FSDP, SPMD, MULTI_CPU"});
  EXPECT_ACC_ERROR(Config::from_yaml("fsdp_config:\n  fsdp_auto_wrap_policy: [x]\n"),
                   {"fsdp_config.fsdp_auto_wrap_policy: bad value '<a list>' (expected a name)"});
}

TEST(ConfigYaml, Fp16IsAnErrorNamingWhatAccSupports) {
  EXPECT_ACC_ERROR(Config::from_yaml("mixed_precision: fp16\n"),
                   {"<yaml>: mixed_precision: bad value 'fp16' (allowed: no, bf16)"});
  EXPECT_ACC_ERROR(Config::from_yaml("fsdp_config:\n  fsdp_reduce_dtype: f16\n"),
                   {"fsdp_config.fsdp_reduce_dtype: bad value 'f16' (allowed: f32, bf16)"});
}

TEST(ConfigYaml, BadTypesNameKeyValueAndExpectation) {
  EXPECT_ACC_ERROR(Config::from_yaml("num_processes: 2.5\n"),
                   {"num_processes: bad value '2.5' (expected an integer >= 1)"});
  EXPECT_ACC_ERROR(Config::from_yaml("num_machines: 0\n"),
                   {"num_machines: bad value '0' (expected an integer >= 1)"});
  EXPECT_ACC_ERROR(Config::from_yaml("fsdp_config:\n  fsdp_size: -1\n"),
                   {"fsdp_config.fsdp_size: bad value '-1' (expected an integer >= 0)"});
  EXPECT_ACC_ERROR(Config::from_yaml("fsdp_config:\n  fsdp_min_num_params: many\n"),
                   {"fsdp_config.fsdp_min_num_params: bad value 'many' (expected an integer >= 0)"});
  EXPECT_ACC_ERROR(Config::from_yaml("fsdp_config:\n  fsdp_offload_params: maybe\n"),
                   {"fsdp_config.fsdp_offload_params: bad value 'maybe' (expected true or false)"});
  EXPECT_ACC_ERROR(Config::from_yaml("spmd_config:\n  mesh_shape: 4\n"),
                   {"spmd_config.mesh_shape: bad value '4' (expected a list, each an integer)"});
  EXPECT_ACC_ERROR(Config::from_yaml("spmd_config:\n  mesh_shape: [2, x]\n"),
                   {"spmd_config.mesh_shape: bad value 'x' (expected an integer)"});
  EXPECT_ACC_ERROR(Config::from_yaml("fsdp_config: FULL_SHARD\n"),
                   {"fsdp_config: bad value 'FULL_SHARD' (expected a mapping of keys)"});
  EXPECT_ACC_ERROR(Config::from_yaml("- FSDP\n"),
                   {"<yaml>: expected a mapping of config keys, got '<a list>'"});
}

TEST(ConfigYaml, ErrorsAreOneLineStartingWithTheSource) {
  for (const char* text : {"num_procs: 2\n", "fsdp_config: [a\n", "mixed_precision: fp16\n"}) {
    const std::string message = test::error_of([&] { Config::from_yaml(text, "my/config.yaml"); });
    EXPECT_EQ(message.rfind("my/config.yaml: ", 0), 0u) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  EXPECT_ACC_ERROR(Config::from_yaml("fsdp_config: [a\n"), {"<yaml>: not valid YAML:"});
}

Config everything_set() {
  Config c;
  c.compute.bf16 = true;
  c.dist.distributed_type = DistributedType::FSDP;
  c.dist.strategy = "MY_PLUGIN";
  c.dist.num_processes = 8;
  c.dist.num_machines = 2;
  FsdpConfig& f = c.dist.fsdp;
  f.size = 4;
  f.sharding_strategy = ShardingStrategy::HYBRID_SHARD_ZERO2;
  f.auto_wrap_policy = WrapPolicy::SIZE_BASED_WRAP;
  f.auto_wrap_policy_set = true;
  f.wrap_layer_cls = {"GPT2Block", "LlamaDecoderLayer"};
  f.min_num_params = int64_t{1} << 40;  // wider than int
  f.backward_prefetch = BackwardPrefetch::NO_PREFETCH;
  f.forward_prefetch = true;
  f.offload_params = true;
  f.offload_dir = "/scratch/acc offload";
  f.state_dict_type = StateDictType::FULL_STATE_DICT;
  f.sync_module_states = true;
  f.cpu_ram_efficient_loading = true;
  f.activation_checkpointing = true;
  f.use_orig_params = false;
  f.reduce_bf16 = true;
  f.vocab_parallel = false;
  f.memory_limit = int64_t{3} << 30;
  f.activation_checkpointing = false;
  f.activation_checkpointing_cls = {"GPT2MLP", "GPT2Attention"};
  f.ignored_modules = {"transformer.wpe", "lm_head"};
  c.dist.spmd = {{2, 4}, {"data", "model"}, "rules.yaml", {}};
  return c;
}

TEST(ConfigYaml, RoundTripsThroughToYaml) {
  const Config everything = everything_set();
  EXPECT_EQ(Config::from_yaml(everything.to_yaml()), everything) << everything.to_yaml();
  EXPECT_EQ(Config::from_yaml(Config{}.to_yaml()), Config{}) << Config{}.to_yaml();
  Config spmd_rules_only;  // spmd_config is written when any one of its fields is set
  spmd_rules_only.dist.distributed_type = DistributedType::SPMD;
  spmd_rules_only.dist.spmd.sharding_rules = "rules.yaml";
  EXPECT_EQ(Config::from_yaml(spmd_rules_only.to_yaml()), spmd_rules_only);
  Config pipeline;  // a section its strategy does not read is not written
  pipeline.dist.strategy = "PIPELINE";
  pipeline.dist.spmd.sharding_rules = "rules.yaml";
  EXPECT_EQ(pipeline.to_yaml().find("spmd_config"), std::string::npos) << pipeline.to_yaml();
  EXPECT_EQ(pipeline.to_yaml().find("fsdp_config"), std::string::npos) << pipeline.to_yaml();
  Config from_accelerate = Config::from_yaml(kAccelerateFsdpFile);
  from_accelerate.not_applicable_keys.clear();  // to_yaml writes only the keys acc acts on
  EXPECT_EQ(Config::from_yaml(from_accelerate.to_yaml()), from_accelerate);
}

TEST(ConfigYaml, ToYamlWritesOnlyWhatIsSet) {
  const std::string defaults = Config{}.to_yaml();
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "distributed_type: NO\n", defaults);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "fsdp_config:\n  fsdp_size: 0\n", defaults);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "mixed_precision: 'no'\n",
                      defaults);  // YAML 1.1 reads `no` as false
  for (const char* absent : {"\nstrategy:", "fsdp_auto_wrap_policy:", "spmd_config:"})
    EXPECT_EQ(defaults.find(absent), std::string::npos) << absent << " in\n" << defaults;
  const std::string everything = everything_set().to_yaml();
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "strategy: MY_PLUGIN\n", everything);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "fsdp_auto_wrap_policy: SIZE_BASED_WRAP\n", everything);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring,
                      "fsdp_transformer_layer_cls_to_wrap: GPT2Block,LlamaDecoderLayer\n", everything);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "mesh_shape: [2, 4]\n", everything);
  EXPECT_PRED_FORMAT2(::testing::IsSubstring, "fsdp_ignored_modules: [transformer.wpe, lm_head]\n",
                      everything);
}

}  // namespace
}  // namespace acc
