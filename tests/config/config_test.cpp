// acc::Config beyond the YAML text: the shipped configs/*.yaml, load() through ACC_CONFIG_FILE,
// validate(), strategy_name(), effective_wrap_policy() and the enum names.
#include "acc/config/config.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "distributed/local/error_matchers.h"

namespace acc {
namespace {

const std::filesystem::path kConfigs = std::filesystem::path(ACC_SOURCE_DIR) / "configs";

TEST(Config, ShippedConfigsLoadWithoutWarningsAndValidate) {
  const std::map<std::string, std::pair<ShardingStrategy, int>> expected = {
      {"fsdp_full_shard.yaml", {ShardingStrategy::FULL_SHARD, 2}},
      {"fsdp_shard_grad_op.yaml", {ShardingStrategy::SHARD_GRAD_OP, 2}},
      {"fsdp_no_shard.yaml", {ShardingStrategy::NO_SHARD, 2}},
      {"fsdp_hybrid_shard.yaml", {ShardingStrategy::HYBRID_SHARD, 4}},
      {"fsdp_hybrid_shard_zero2.yaml", {ShardingStrategy::HYBRID_SHARD_ZERO2, 4}},
  };
  int checked = 0, spmd_checked = 0, auto_checked = 0, pipeline_checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kConfigs)) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    if (name.starts_with("spmd_")) {  // a (2, 2) mesh, Llama's rules (GPT-2's in spmd_gpt2_fsdp_tp)
      const Config c = Config::from_file(entry.path().string());
      EXPECT_TRUE(c.warnings.empty());
      EXPECT_EQ(c.dist.distributed_type, DistributedType::SPMD);
      EXPECT_EQ(c.strategy_name(), "SPMD");
      EXPECT_EQ(c.dist.num_processes, 4);
      EXPECT_EQ(c.dist.spmd.mesh_shape, (std::vector<int>{2, 2}));
      EXPECT_EQ(c.dist.spmd.axis_names, (std::vector<std::string>{"fsdp", "model"}));
      EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(ACC_SOURCE_DIR) / c.dist.spmd.sharding_rules));
      EXPECT_NO_THROW(c.validate());
      ++spmd_checked;
      continue;
    }
    if (name.starts_with("pipeline_")) {  // the pipeline plugin's own section
      const Config c = Config::from_file(entry.path().string());
      EXPECT_TRUE(c.warnings.empty());
      EXPECT_EQ(c.strategy_name(), "PIPELINE");
      EXPECT_EQ(c.dist.num_processes, 4);
      const bool zero_bubble = name == "pipeline_zero_bubble.yaml";
      EXPECT_EQ(c.section("pipeline_config").text("schedule"), zero_bubble ? "zero_bubble" : "1F1B");
      EXPECT_EQ(c.section("pipeline_config").integer("microbatches"), name == "pipeline_fsdp.yaml" ? 2 : 4);
      EXPECT_EQ(c.section("pipeline_config").integer("stages"), name == "pipeline_1f1b.yaml" || zero_bubble ? 0 : 2);
      EXPECT_EQ(c.section("pipeline_config").integer("tensor_parallel"), name == "pipeline_tp.yaml" ? 2 : 1);
      EXPECT_NO_THROW(c.validate());
      ++pipeline_checked;
      continue;
    }
    if (name == "fsdp_auto_offload.yaml") {  // AUTO within memory, files in '.' as the last resort
      const Config c = Config::from_file(entry.path().string());
      EXPECT_TRUE(c.warnings.empty());
      EXPECT_EQ(c.strategy_name(), "AUTO");
      EXPECT_EQ(c.dist.num_processes, 4);
      EXPECT_TRUE(c.compute.bf16);
      EXPECT_EQ(c.dist.fsdp.offload_dir, ".");
      EXPECT_TRUE(c.dist.fsdp.cpu_ram_efficient_loading);
      EXPECT_EQ(c.dist.fsdp.effective_wrap_policy(), WrapPolicy::TRANSFORMER_BASED_WRAP);
      EXPECT_NO_THROW(c.validate());
      ++auto_checked;
      continue;
    }
    const auto it = expected.find(name);
    ASSERT_NE(it, expected.end()) << "a new config: add it to this test";
    const auto [strategy, processes] = it->second;
    const Config c = Config::from_file(entry.path().string());
    EXPECT_TRUE(c.warnings.empty());
    EXPECT_EQ(c.dist.distributed_type, DistributedType::FSDP);
    EXPECT_EQ(c.dist.fsdp.sharding_strategy, strategy);
    EXPECT_EQ(c.dist.num_processes, processes);
    EXPECT_EQ(c.dist.num_machines, 1);
    EXPECT_FALSE(c.compute.bf16);
    EXPECT_EQ(c.dist.fsdp.effective_wrap_policy(), WrapPolicy::TRANSFORMER_BASED_WRAP);
    EXPECT_TRUE(c.dist.fsdp.wrap_layer_cls.empty());  // the model's own blocks
    EXPECT_EQ(c.strategy_name(), to_string(strategy));
    EXPECT_NO_THROW(c.validate());
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(expected.size()));
  EXPECT_EQ(spmd_checked, 4);
  EXPECT_EQ(auto_checked, 1);
  EXPECT_EQ(pipeline_checked, 4);
}

// Sets (or, with nullopt, unsets) one variable for a test and restores it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? setenv(name, value->c_str(), 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_ ? setenv(name_, old_->c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(Config, LoadReadsAccConfigFileWhenSet) {
  const std::string path = (kConfigs / "fsdp_hybrid_shard.yaml").string();
  const auto home = std::filesystem::temp_directory_path() / "acc_config_home_test";
  std::filesystem::remove_all(home);
  ScopedEnv config_home("ACC_CONFIG_HOME", home.string());  // no default config there yet
  {
    ScopedEnv env("ACC_CONFIG_FILE", path);
    const Config c = Config::load();
    EXPECT_EQ(c, Config::from_file(path));
    EXPECT_EQ(c.dist.fsdp.sharding_strategy, ShardingStrategy::HYBRID_SHARD);
  }
  {
    ScopedEnv env("ACC_CONFIG_FILE", std::nullopt);
    EXPECT_EQ(Config::load(), Config{});
  }
  {
    ScopedEnv env("ACC_CONFIG_FILE", "");
    EXPECT_EQ(Config::load(), Config{});
  }
  {
    ScopedEnv env("ACC_CONFIG_FILE", "/no/such/acc.yaml");
    EXPECT_ACC_ERROR(Config::load(), {"/no/such/acc.yaml: no such config file"});
  }
  // Without ACC_CONFIG_FILE, the default config `accelerate config` writes, when it exists.
  std::filesystem::create_directories(home);
  std::filesystem::copy_file(path, home / "default_config.yaml");
  EXPECT_EQ(Config::default_path(), (home / "default_config.yaml").string());
  {
    ScopedEnv env("ACC_CONFIG_FILE", std::nullopt);
    EXPECT_EQ(Config::load().dist.fsdp.sharding_strategy, ShardingStrategy::HYBRID_SHARD);
  }
  std::filesystem::remove_all(home);
}

TEST(Config, FromFileNamesThePathInErrors) {
  EXPECT_ACC_ERROR(Config::from_file("/no/such/dir/fsdp.yaml"),
                   {"/no/such/dir/fsdp.yaml: no such config file"});
  EXPECT_ACC_ERROR(Config::from_file(kConfigs.string()), {kConfigs.string() + ": no such config file"});
}

TEST(Config, StrategyName) {
  Config c;
  EXPECT_EQ(c.strategy_name(), "NO_SHARD");
  c.dist.distributed_type = DistributedType::FSDP;
  const std::pair<ShardingStrategy, const char*> names[] = {
      {ShardingStrategy::FULL_SHARD, "FULL_SHARD"},
      {ShardingStrategy::SHARD_GRAD_OP, "SHARD_GRAD_OP"},
      {ShardingStrategy::NO_SHARD, "NO_SHARD"},
      {ShardingStrategy::HYBRID_SHARD, "HYBRID_SHARD"},
      {ShardingStrategy::HYBRID_SHARD_ZERO2, "HYBRID_SHARD_ZERO2"}};
  for (const auto& [strategy, name] : names) {
    c.dist.fsdp.sharding_strategy = strategy;
    EXPECT_EQ(c.strategy_name(), name);
  }
  c.dist.distributed_type = DistributedType::SPMD;
  EXPECT_EQ(c.strategy_name(), "SPMD");
  c.dist.strategy = "MY_PLUGIN";  // an explicit name wins over distributed_type
  EXPECT_EQ(c.strategy_name(), "MY_PLUGIN");
}

TEST(Config, EffectiveWrapPolicy) {
  FsdpConfig f;
  EXPECT_EQ(f.effective_wrap_policy(), WrapPolicy::NO_WRAP);
  f.min_num_params = 1000;
  EXPECT_EQ(f.effective_wrap_policy(), WrapPolicy::SIZE_BASED_WRAP);
  f.wrap_layer_cls = {"GPT2Block"};  // classes take precedence over a size
  EXPECT_EQ(f.effective_wrap_policy(), WrapPolicy::TRANSFORMER_BASED_WRAP);
  f.auto_wrap_policy = WrapPolicy::NO_WRAP;
  f.auto_wrap_policy_set = true;
  EXPECT_EQ(f.effective_wrap_policy(), WrapPolicy::NO_WRAP);
}

TEST(Config, ACallableWrapPolicyDecidesAndComparesBySetOrNot) {
  Config with, other;
  with.dist.distributed_type = DistributedType::FSDP;
  with.dist.fsdp.auto_wrap_policy = WrapPolicy::SIZE_BASED_WRAP;  // no size: invalid alone
  with.dist.fsdp.auto_wrap_policy_set = true;
  EXPECT_THROW(with.validate(), Error);
  with.dist.fsdp.wrap_fn.fn = [](const nn::Module&, const std::string&) { return false; };
  EXPECT_NO_THROW(with.validate());
  other = with;
  other.dist.fsdp.wrap_fn.fn = [](const nn::Module&, const std::string&) { return true; };
  EXPECT_EQ(with, other);  // a callable cannot be compared, only whether there is one
  other.dist.fsdp.wrap_fn.fn = nullptr;
  EXPECT_NE(with, other);
}

TEST(Config, ValidateAcceptsDefaultsAndAWellFormedSpmdConfig) {
  EXPECT_NO_THROW(Config{}.validate());
  Config spmd;
  spmd.dist.distributed_type = DistributedType::SPMD;
  spmd.dist.spmd = {{2, 2}, {"fsdp", "model"}, "", {}};
  EXPECT_NO_THROW(spmd.validate());
}

TEST(Config, ValidateNamesTheYamlKey) {
  auto with = [](auto change) {
    Config c;
    change(c);
    return c;
  };
  EXPECT_ACC_ERROR(with([](Config& c) { c.dist.num_processes = 0; }).validate(),
                   {"num_processes: must be >= 1 (got 0)"});
  EXPECT_ACC_ERROR(with([](Config& c) { c.dist.num_machines = -1; }).validate(),
                   {"num_machines: must be >= 1 (got -1)"});
  EXPECT_ACC_ERROR(with([](Config& c) { c.dist.fsdp.size = -2; }).validate(),
                   {"fsdp_config.fsdp_size: must be >= 0 (got -2)"});
  EXPECT_ACC_ERROR(with([](Config& c) { c.dist.fsdp.min_num_params = -5; }).validate(),
                   {"fsdp_config.fsdp_min_num_params: must be >= 0 (got -5)"});
  EXPECT_NO_THROW(with([](Config& c) {  // no class named: the model's own blocks
                    c.dist.fsdp.auto_wrap_policy = WrapPolicy::TRANSFORMER_BASED_WRAP;
                    c.dist.fsdp.auto_wrap_policy_set = true;
                  }).validate());
  EXPECT_ACC_ERROR(with([](Config& c) {
                     c.dist.fsdp.auto_wrap_policy = WrapPolicy::SIZE_BASED_WRAP;
                     c.dist.fsdp.auto_wrap_policy_set = true;
                   }).validate(),
                   {"fsdp_config.fsdp_min_num_params: SIZE_BASED_WRAP needs a value > 0"});
}

TEST(Config, ValidateSpmdMesh) {
  auto spmd = [](std::vector<int> shape, std::vector<std::string> names) {
    Config c;
    c.dist.distributed_type = DistributedType::SPMD;
    c.dist.spmd = {std::move(shape), std::move(names), "", {}};
    return c;
  };
  EXPECT_ACC_ERROR(spmd({}, {}).validate(), {"spmd_config.mesh_shape:", "needs a mesh shape"});
  EXPECT_ACC_ERROR(spmd({2, 0}, {"a", "b"}).validate(),
                   {"spmd_config.mesh_shape: entries must be > 0 (got 0)"});
  EXPECT_ACC_ERROR(spmd({2, 2}, {"fsdp"}).validate(),
                   {"spmd_config.axis_names:", "got 1 names for 2 mesh axes"});
  EXPECT_ACC_ERROR(spmd({2, 2}, {"fsdp", "fsdp"}).validate(),
                   {"spmd_config.axis_names: 'fsdp' appears twice"});
}

TEST(Config, EnumNamesRoundTripAndBadNamesAreNamed) {
  for (auto s : {ShardingStrategy::FULL_SHARD, ShardingStrategy::SHARD_GRAD_OP, ShardingStrategy::NO_SHARD,
                 ShardingStrategy::HYBRID_SHARD, ShardingStrategy::HYBRID_SHARD_ZERO2})
    EXPECT_EQ(parse_sharding_strategy(to_string(s), "k"), s);
  for (auto t : {DistributedType::NO, DistributedType::FSDP, DistributedType::SPMD})
    EXPECT_EQ(parse_distributed_type(to_string(t), "k"), t);
  for (auto p : {WrapPolicy::TRANSFORMER_BASED_WRAP, WrapPolicy::SIZE_BASED_WRAP, WrapPolicy::NO_WRAP})
    EXPECT_EQ(parse_wrap_policy(to_string(p), "k"), p);
  for (auto p :
       {BackwardPrefetch::BACKWARD_PRE, BackwardPrefetch::BACKWARD_POST, BackwardPrefetch::NO_PREFETCH})
    EXPECT_EQ(parse_backward_prefetch(to_string(p), "k"), p);
  for (auto t : {StateDictType::SHARDED_STATE_DICT, StateDictType::FULL_STATE_DICT})
    EXPECT_EQ(parse_state_dict_type(to_string(t), "k"), t);
  EXPECT_EQ(to_string(ShardingStrategy::HYBRID_SHARD), "HYBRID_SHARD");
  EXPECT_EQ(to_string(WrapPolicy::SIZE_BASED_WRAP), "SIZE_BASED_WRAP");  // not the alias
  EXPECT_EQ(parse_backward_prefetch("backward_post", "k"), BackwardPrefetch::BACKWARD_POST);
  EXPECT_ACC_ERROR(parse_backward_prefetch("BACKWARD", "my_key"),
                   {"my_key: bad value 'BACKWARD' (allowed: BACKWARD_PRE, BACKWARD_POST, NO_PREFETCH)"});
  EXPECT_ACC_ERROR(
      parse_wrap_policy("", "wrap"),
      {"wrap: bad value ''", "TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP, NO_WRAP, SIZED_BASED_WRAP"});
}

}  // namespace
}  // namespace acc

// docs/config.md is the user's reference: every key the code reads has a row there.
TEST(ConfigDocs, EveryKeyIsDocumented) {
  std::ifstream in(ACC_SOURCE_DIR "/docs/config.md");
  ASSERT_TRUE(in.is_open());
  const std::string doc((std::istreambuf_iterator<char>(in)), {});
  for (const auto& key : acc::Config::keys()) {
    const std::string name = key.substr(key.find('.') + 1);  // no section: the table's spelling
    EXPECT_NE(doc.find("`" + name + "`"), std::string::npos) << key << " is missing from docs/config.md";
  }
}
