#pragma once
// acc::Config: what acc::accelerate() needs to know to spread a model over ranks. The C++ struct
// mirrors TorchAcc (config.compute.bf16, config.dist.fsdp.wrap_layer_cls, ...); files use
// Hugging Face accelerate's YAML layout (distributed_type, mixed_precision, fsdp_config.*) plus
// acc's own keys, so a file `accelerate config` wrote for PyTorch loads here.
//
// Config itself reads only the generic keys. Every section belongs to the plugin that declares
// it (option_section.h): `fsdp_config:` to the FSDP plugin, `spmd_config:` to the SPMD plugin,
// `diloco_config:` to DiLoCo's. The first two keep their values in the typed fields below
// (FsdpConfig, SpmdConfig), which a user program sets in C++; the plugins say how each key is
// read, written, checked and asked, and which strategy a distributed_type runs.
//
// Loading never drops a key silently: keys acc knows but does not act on yet are kept in
// `warnings` (and logged once by load/from_file); a key nobody knows, or a bad value, is an
// error naming the key, the value and what is allowed.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "acc/config/option_section.h"

namespace acc {

class Tensor;
namespace nn {
class Module;
}
namespace spmd {
struct PartitionSpec;
}

// A setting written in C++. It has no YAML form; two configs compare equal when both have one
// or neither has.
template <class Signature>
struct ConfigCallable {
  std::function<Signature> fn;
  explicit operator bool() const { return static_cast<bool>(fn); }
  bool operator==(const ConfigCallable& other) const { return bool(*this) == bool(other); }
};

// A wrap policy (PyTorch's callable auto_wrap_policy): true makes `module`, whose qualified name
// is `name`, an FSDP unit.
using WrapCallable = ConfigCallable<bool(const nn::Module& module, const std::string& name)>;

// FSDPv2's shard_output: the partition spec a model's output (a causal LM's logits [B, T, V])
// should have when forward returns it (spmd/partition_spec.h; docs/spmd.md says which).
using OutputShardingCallable = ConfigCallable<spmd::PartitionSpec(const Tensor& output)>;

// FSDP's sharding strategies, numbered as in Hugging Face accelerate (1-5). AUTO is acc's: the
// least-communicating strategy whose memory estimate fits fsdp_memory_limit, which
// acc::accelerate() picks (it knows the model and the batch) before any strategy is made.
enum class ShardingStrategy { FULL_SHARD = 1, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, HYBRID_SHARD_ZERO2, AUTO };
enum class DistributedType { NO, FSDP, SPMD };
enum class WrapPolicy { TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP, NO_WRAP };
enum class BackwardPrefetch { BACKWARD_PRE, BACKWARD_POST, NO_PREFETCH };
enum class StateDictType { SHARDED_STATE_DICT, FULL_STATE_DICT };

// "FULL_SHARD", ...; parse_* accept the name (any case) or, for sharding strategies, "1".."5",
// and throw acc::Error naming `key`, the value and the allowed values otherwise.
std::string to_string(ShardingStrategy s);
std::string to_string(DistributedType t);
std::string to_string(WrapPolicy p);
std::string to_string(BackwardPrefetch p);
std::string to_string(StateDictType t);
ShardingStrategy parse_sharding_strategy(const std::string& value, const std::string& key);
// What the strategies mean, for the engine and the memory estimate alike: the hybrids shard
// within a node and replicate across nodes; FULL_SHARD and HYBRID_SHARD free each unit's
// gathered parameters after its forward (the others keep them until its backward).
bool is_hybrid(ShardingStrategy s);
bool reshards_after_forward(ShardingStrategy s);
DistributedType parse_distributed_type(const std::string& value, const std::string& key);
WrapPolicy parse_wrap_policy(const std::string& value, const std::string& key);  // also SIZED_BASED_WRAP
BackwardPrefetch parse_backward_prefetch(const std::string& value, const std::string& key);
StateDictType parse_state_dict_type(const std::string& value, const std::string& key);
// Every spelling parse_* accepts for E (ShardingStrategy, WrapPolicy, BackwardPrefetch,
// StateDictType), names first: the values an option section allows.
template <class E>
std::vector<std::string> spellings();

// The strategy name that asks acc::accelerate() to choose one for the model and batch
// (`strategy: AUTO`, or `fsdp_sharding_strategy: AUTO`): accelerate/auto_strategy.h.
inline constexpr const char* kAutoStrategy = "AUTO";

// The plugin section called `name` (the plugin registry loads plugins to find it), or null.
std::shared_ptr<const OptionSection> find_option_section(const std::string& name);
// Every section of every plugin in the search folders (loading them first); none without a
// plugin registry.
std::vector<std::shared_ptr<const OptionSection>> all_option_sections();
// The answer of the section of the strategy `config` runs (Config::strategy_section) to one
// of OptionSection's questions, or `otherwise` when there is no such section or it does not
// answer: strategy_answer(config, &OptionSection::deferred_init, false).
template <class R>
R strategy_answer(const Config& config, std::function<R(const Config&)> OptionSection::*question, R otherwise);

struct ComputeConfig {
  bool bf16 = false;  // mixed_precision: bf16 — parameters gathered and multiplied in bf16

  bool operator==(const ComputeConfig&) const = default;
};

struct FsdpConfig {
  // Ranks one shard group spans; 0 = all of them (the world, or a node for the hybrid ones).
  int size = 0;
  ShardingStrategy sharding_strategy = ShardingStrategy::FULL_SHARD;
  // With no explicit policy: TRANSFORMER_BASED_WRAP when wrap_layer_cls is set, SIZE_BASED_WRAP
  // when min_num_params > 0, NO_WRAP (one unit, the whole model) otherwise.
  WrapPolicy auto_wrap_policy = WrapPolicy::NO_WRAP;
  bool auto_wrap_policy_set = false;          // true when a file or the user chose the policy
  // fsdp_transformer_layer_cls_to_wrap; empty under TRANSFORMER_BASED_WRAP: the model's own
  // blocks (models::Structure::block_types).
  std::vector<std::string> wrap_layer_cls;
  int64_t min_num_params = 0;                // fsdp_min_num_params
  WrapCallable wrap_fn;                      // C++ only; when set it decides instead of the policy
  // Modules (qualified names, e.g. "transformer.wpe") whose parameters stay whole on every rank,
  // their gradients averaged as NO_SHARD's are (fsdp_ignored_modules, acc's key).
  std::vector<std::string> ignored_modules;
  BackwardPrefetch backward_prefetch = BackwardPrefetch::BACKWARD_PRE;
  bool forward_prefetch = false;
  // Master parameters, their gradients and the optimizer state in the offload memory tier.
  bool offload_params = false;
  // Master parameters and optimizer state in files under this directory (fsdp_offload_dir),
  // paged in only while the optimizer steps; implies offload_params.
  std::string offload_dir;
  StateDictType state_dict_type = StateDictType::SHARDED_STATE_DICT;
  bool sync_module_states = false;
  bool cpu_ram_efficient_loading = false;
  bool activation_checkpointing = false;  // every unit but the root
  // fsdp_activation_checkpointing: [GPT2MLP, ...]: modules of these classes, units or not.
  std::vector<std::string> activation_checkpointing_cls;
  bool use_orig_params = true;
  bool flatten_parameters = true;  // TorchAcc's name; acc always flattens per unit
  bool reduce_bf16 = false;        // reduce gradients in bf16 (default f32, as PyTorch's MixedPrecision)
  // A causal LM's token embedding and head stay split over the shard group by vocabulary rows,
  // never gathered; their activations are exchanged instead (fsdp_vocab_parallel, acc's key).
  bool vocab_parallel = true;
  // Bytes one rank may use, AUTO's budget (fsdp_memory_limit: 8GiB); 0 = the rank's share of
  // the machine's physical memory.
  int64_t memory_limit = 0;
  // MiB of f32 gradient one reduction carries at most (fsdp_bucket_mb, acc's key): a unit's
  // parameters are reduced together in buckets this size; 0 = each unit's in one.
  double bucket_mb = 25;
  // Training gathers send each shard block-quantized to int8, a scale per quantize_block
  // elements, dequantized into the compute dtype on arrival (fsdp_quantize_weights: int8,
  // ZeRO++'s qwZ); the masters, the optimizer and summon_full_params stay exact.
  bool quantize_weights = false;
  // Gradient reductions across nodes send this many bits a value the same way (8 or 4; 0: not
  // quantized), summed in f32 on arrival; with several ranks per node the node reduces in f32
  // first and only its sum crosses (fsdp_quantize_gradients: int8 or int4, ZeRO++'s qgZ).
  int quantize_gradients = 0;
  int64_t quantize_block = 256;  // fsdp_quantize_block, for both
  // After a unit's forward, keep a copy of it sharded among the node's ranks, so the backward's
  // gather never crosses nodes (fsdp_reshard_after_forward: node, ZeRO++'s hpZ; FSDP2's
  // reshard_after_forward=int). Costs the units / ranks-per-node in the compute dtype.
  bool reshard_to_node = false;

  // The policy that applies after the defaults above.
  WrapPolicy effective_wrap_policy() const;

  bool operator==(const FsdpConfig&) const = default;
};

struct SpmdConfig {
  std::vector<int> mesh_shape;           // e.g. {2, 2}
  std::vector<std::string> axis_names;   // e.g. {"fsdp", "model"}
  std::string sharding_rules;            // a rules file, e.g. configs/sharding/llama-fsdp.yaml
  // Unset: FSDPv2's default, the output's batch split over fsdp and every other dim whole.
  OutputShardingCallable shard_output;

  bool operator==(const SpmdConfig&) const = default;
};

struct DistConfig {
  DistributedType distributed_type = DistributedType::NO;
  // The strategy plugin's registered name. Empty: derived (see Config::strategy_name()).
  std::string strategy;
  int num_processes = 1;
  int num_machines = 1;
  // The machine accelerate launch runs on; acc starts every machine's ranks from machine 0.
  int machine_rank = 0;
  FsdpConfig fsdp;
  SpmdConfig spmd;

  bool operator==(const DistConfig&) const = default;
};

struct Config {
  ComputeConfig compute;
  DistConfig dist;
  // Sections owned by plugins (option_section.h), by name ("diloco_config"): those a file or
  // set() gave a value. A strategy reads its own through section().
  std::map<std::string, OptionValues> sections;
  // Keys of the file acc knows but does not act on (e.g. compute_environment), one message each.
  std::vector<std::string> warnings;
  // Hugging Face accelerate's keys that do not apply to acc (debug, gpu_ids, tpu_env, ...), in
  // file order: accepted without a warning; from_file names them in one line.
  std::vector<std::string> not_applicable_keys;

  // A plugin's section: its values here, else its defaults. A name no loaded plugin declares
  // (after loading every plugin of the search folders) is an error naming it.
  OptionValues section(const std::string& name) const;
  // The same, to change: the section is added with its defaults when absent.
  OptionValues& section(const std::string& name);

  // ACC_CONFIG_FILE when set (accelerate launch sets it), else the default config file
  // (default_path(), what `accelerate config` writes) when it exists, else the defaults.
  static Config load();
  // $ACC_CONFIG_HOME/default_config.yaml, else ~/.cache/acc/default_config.yaml.
  static std::string default_path();
  // Every key a file may hold, as "distributed_type", "fsdp_config.fsdp_sharding_strategy", ...,
  // and those of the plugins' sections ("diloco_config.inner_steps").
  static std::vector<std::string> keys();
  // YAML in Hugging Face accelerate's layout; errors name the file and the key. Logs the
  // warnings and the accepted keys that do not apply.
  static Config from_file(const std::string& path);
  // The same without logging, for a caller that reports them itself (accelerate config validate).
  static Config parse_file(const std::string& path);
  // The same from text; `source` names it in errors.
  static Config from_yaml(const std::string& text, const std::string& source = "<yaml>");
  // Sets one key from text as a file would spell it ("FULL_SHARD", "bf16", "[2, 2]"); `key` is
  // its name with or without the section ("fsdp_sharding_strategy" or
  // "fsdp_config.fsdp_sharding_strategy"; a plugin's "diloco_config.inner_steps" or "inner_steps").
  // An unknown key or a bad value is an error naming it and what is allowed.
  void set(const std::string& key, const std::string& value);
  // The same layout from_file reads: from_yaml(to_yaml()) gives an equal Config. A typed
  // section the strategy does not read (strategy_reads) is left out.
  std::string to_yaml() const;
  // Throws acc::Error naming the field and what is allowed: the generic keys' checks, then
  // every section's own (the FSDP plugin's: fsdp.size < 0, SIZE_BASED_WRAP without a size; the
  // SPMD plugin's: SPMD without mesh_shape, mesh/axis length mismatch; a plugin's).
  void validate() const;

  // The registered strategy to make: dist.strategy when set; else what the section owning the
  // distributed_type names (OptionSection::strategy_of): the FSDP plugin's NO -> "NO_SHARD" (a
  // plain run is NO_SHARD on its ranks) and FSDP -> the sharding strategy's name
  // ("FULL_SHARD", ...), the SPMD plugin's SPMD -> "SPMD".
  std::string strategy_name() const;
  // Whether the config asks acc::accelerate() to choose the strategy (AUTO): strategy_name()
  // is kAutoStrategy.
  bool asks_for_auto() const { return strategy_name() == kAutoStrategy; }
  // The section of the strategy the config runs: the one listing dist.strategy among its
  // `strategies`, else the one whose strategy_of names that strategy (any, when dist.strategy
  // is empty or AUTO); null when none does (a strategy without a section, no plugin found).
  // What core asks instead of reading a strategy's keys.
  std::shared_ptr<const OptionSection> strategy_section() const;
  // Whether the strategy the config runs reads the section `name` (its own, or one it names in
  // OptionSection::also_reads); always under AUTO, which may choose any strategy, and for a
  // strategy without a section of its own.
  bool strategy_reads(const std::string& name) const;
  // The warning for keys of a section the strategy does not read (fsdp_config under PIPELINE):
  // they change nothing, which the user should hear.
  std::string unread_section_warning(const std::string& name, const std::string& keys) const;
  // "keys of Hugging Face accelerate that do not apply to acc, accepted: debug, gpu_ids".
  std::string not_applicable_note() const;

  bool operator==(const Config&) const = default;
};

template <class R>
R strategy_answer(const Config& config, std::function<R(const Config&)> OptionSection::*question, R otherwise) {
  const auto section = config.strategy_section();
  if (!section || !((*section).*question)) return otherwise;
  return ((*section).*question)(config);
}

}  // namespace acc
