// The sections the FSDP and SPMD plugins declare for config.dist.fsdp and config.dist.spmd: what
// each key says is its default is what a default-constructed acc::Config holds, and every key
// they declare reaches a field (a value set through the section reads back the same); and the
// answers core asks of the running strategy's section.
#include <gtest/gtest.h>

#include "acc/config/config.h"
#include "acc/plugin/registry.h"

namespace acc {
namespace {

std::vector<std::shared_ptr<const OptionSection>> field_sections() {
  std::vector<std::shared_ptr<const OptionSection>> out;
  for (const auto& s : plugin::Registry::global().sections())
    if (s->in_config_fields()) out.push_back(s);
  return out;
}

TEST(BuiltInSections, FsdpAndSpmdLiveInTheTypedFields) {
  std::vector<std::string> names;
  for (const auto& s : field_sections()) names.push_back(s->name);
  EXPECT_EQ(names, (std::vector<std::string>{"fsdp_config", "spmd_config"}));
}

TEST(BuiltInSections, DeclaredDefaultsAreTheConfigDefaults) {
  const Config defaults;
  for (const auto& section : field_sections())
    for (const auto& spec : section->options) {
      const auto held = spec.load(defaults);
      if (!held) continue;  // not written at its default
      const std::string key = section->name + "." + spec.key;
      EXPECT_EQ(spec.checked(*held, key), spec.checked(spec.default_value, key)) << key;
    }
}

TEST(BuiltInSections, EveryKeyReachesItsField) {
  // A value other than the default for each key with a value of its own, set and read back.
  const std::map<std::string, std::string> values{
      {"fsdp_size", "2"}, {"fsdp_sharding_strategy", "SHARD_GRAD_OP"}, {"fsdp_auto_wrap_policy", "SIZE_BASED_WRAP"},
      {"fsdp_transformer_layer_cls_to_wrap", "[GPT2Block]"}, {"fsdp_min_num_params", "7"},
      {"fsdp_ignored_modules", "[lm_head]"}, {"fsdp_backward_prefetch", "NO_PREFETCH"},
      {"fsdp_forward_prefetch", "true"}, {"fsdp_offload_params", "true"}, {"fsdp_offload_dir", "/tmp/x"},
      {"fsdp_state_dict_type", "FULL_STATE_DICT"}, {"fsdp_sync_module_states", "true"},
      {"fsdp_cpu_ram_efficient_loading", "true"}, {"fsdp_activation_checkpointing", "[GPT2MLP]"},
      {"fsdp_use_orig_params", "false"}, {"fsdp_reduce_dtype", "bf16"}, {"fsdp_vocab_parallel", "false"},
      {"fsdp_memory_limit", "1GiB"}, {"fsdp_bucket_mb", "0.5"},
      {"fsdp_quantize_weights", "int8"}, {"fsdp_quantize_gradients", "int4"}, {"fsdp_quantize_block", "64"},
      {"fsdp_reshard_after_forward", "node"}, {"axis_names", "[fsdp, model]"}, {"mesh_shape", "[2, 1]"},
      {"sharding_rules", "rules.yaml"}};
  for (const auto& section : field_sections())
    for (const auto& spec : section->options) {
      if (spec.key == "fsdp_version") continue;  // read for its warning only
      const auto it = values.find(spec.key);
      ASSERT_NE(it, values.end()) << "no test value for " << spec.key;
      Config c;
      c.set(section->name + "." + spec.key, it->second);
      EXPECT_FALSE(c == Config{}) << spec.key << " changed no field";
      const auto held = spec.load(c);
      ASSERT_TRUE(held) << spec.key;
      const std::string key = section->name + "." + spec.key;
      EXPECT_EQ(spec.checked(*held, key), spec.checked(it->second, key)) << key;
    }
}

// Lists of names take one name, or names separated by commas, as launch's command line gives
// them, like a YAML list.
TEST(BuiltInSections, NameListsTakeABareName) {
  Config c;
  c.set("fsdp_ignored_modules", "transformer.wpe");
  EXPECT_EQ(c.dist.fsdp.ignored_modules, std::vector<std::string>{"transformer.wpe"});
  c.set("fsdp_ignored_modules", "transformer.wpe, lm_head");
  EXPECT_EQ(c.dist.fsdp.ignored_modules, (std::vector<std::string>{"transformer.wpe", "lm_head"}));
}

// What core asks instead of reading a strategy's keys: the section of the strategy the config
// runs answers, from its own keys.
TEST(BuiltInSections, TheRunningStrategysSectionAnswersCore) {
  Config plain;
  ASSERT_TRUE(plain.strategy_section());
  EXPECT_EQ(plain.strategy_section()->name, "fsdp_config");  // a plain run is NO_SHARD
  EXPECT_FALSE(strategy_answer(plain, &OptionSection::full_checkpoints, true));
  EXPECT_FALSE(strategy_answer(plain, &OptionSection::deferred_init, true));
  EXPECT_EQ(strategy_answer(plain, &OptionSection::memory_limit, int64_t{-1}), 0);
  EXPECT_EQ(strategy_answer(plain, &OptionSection::summary, std::string()), "NO_WRAP");

  Config fsdp = Config::from_yaml(
      "distributed_type: FSDP\nfsdp_config:\n  fsdp_state_dict_type: FULL_STATE_DICT\n"
      "  fsdp_cpu_ram_efficient_loading: true\n  fsdp_memory_limit: 1GiB\n");
  EXPECT_EQ(fsdp.strategy_section()->name, "fsdp_config");
  EXPECT_TRUE(strategy_answer(fsdp, &OptionSection::full_checkpoints, false));
  EXPECT_TRUE(strategy_answer(fsdp, &OptionSection::deferred_init, false));
  EXPECT_EQ(strategy_answer(fsdp, &OptionSection::memory_limit, int64_t{0}), int64_t{1} << 30);
  // A training program wraps the declared blocks when no policy was chosen, and keeps a choice.
  fsdp.strategy_section()->program_defaults(fsdp);
  EXPECT_EQ(strategy_answer(fsdp, &OptionSection::summary, std::string()), "TRANSFORMER_BASED_WRAP");
  Config sized = Config::from_yaml("fsdp_config:\n  fsdp_auto_wrap_policy: NO_WRAP\n");
  sized.strategy_section()->program_defaults(sized);
  EXPECT_EQ(sized.dist.fsdp.effective_wrap_policy(), WrapPolicy::NO_WRAP);

  // SPMD (FSDPv2) shares fsdp_config's checkpoint and loading answers and has no budget of its own.
  Config spmd = Config::from_yaml(
      "distributed_type: SPMD\nspmd_config:\n  mesh_shape: [1]\n  axis_names: [fsdp]\n"
      "fsdp_config:\n  fsdp_state_dict_type: FULL_STATE_DICT\n  fsdp_memory_limit: 1GiB\n");
  EXPECT_EQ(spmd.strategy_section()->name, "spmd_config");
  EXPECT_TRUE(strategy_answer(spmd, &OptionSection::full_checkpoints, false));
  EXPECT_EQ(strategy_answer(spmd, &OptionSection::memory_limit, int64_t{0}), 0);

  // AUTO is the distributed_type's section's; a strategy no section configures gets the
  // defaults, not FSDP's answers.
  Config automatic = fsdp;
  automatic.dist.strategy = "AUTO";
  EXPECT_EQ(automatic.strategy_section()->name, "fsdp_config");
  Config other = fsdp;
  other.dist.strategy = "some_plugins_strategy";
  EXPECT_EQ(other.strategy_section(), nullptr);
  EXPECT_FALSE(strategy_answer(other, &OptionSection::deferred_init, false));
}

}  // namespace
}  // namespace acc
