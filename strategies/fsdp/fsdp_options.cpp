#include "fsdp_options.h"

#include "acc/util/error.h"
#include "acc/util/strings.h"
#include "common/config_fields.h"

namespace acc::fsdp {

namespace {

using parallel::bind;
using parallel::offer;

// A key of FsdpConfig.
template <class T>
OptionSpec key(OptionSpec spec, T FsdpConfig::*member) {
  return bind(std::move(spec), &DistConfig::fsdp, member);
}

// An enum key: stored through parse, written by to_string.
template <class E>
OptionSpec enum_key(OptionSpec spec, E FsdpConfig::*member, E (*parse)(const std::string&, const std::string&)) {
  spec.type = OptionType::choice;
  spec.allowed = spellings<E>();
  spec.store = [member, parse](Config& c, const std::string& text, const std::string& full_key) {
    c.dist.fsdp.*member = parse(text, full_key);
  };
  spec.load = [member](const Config& c) -> std::optional<std::string> { return to_string(c.dist.fsdp.*member); };
  return spec;
}

// A choice between the default, allowed[0], and allowed[1], kept in a bool field that is true
// for allowed[1]. Written only when true, unless `always_written`.
OptionSpec two_way(OptionSpec spec, bool FsdpConfig::*member, bool always_written = false) {
  spec.type = OptionType::choice;
  const std::string off = spec.allowed.at(0), on = spec.allowed.at(1);
  spec.store = [member, on](Config& c, const std::string& text, const std::string&) { c.dist.fsdp.*member = text == on; };
  spec.load = [member, off, on, always_written](const Config& c) -> std::optional<std::string> {
    if (c.dist.fsdp.*member) return on;
    return always_written ? std::optional<std::string>(off) : std::nullopt;
  };
  return spec;
}

std::function<bool(const Config&)> when_policy(WrapPolicy policy) {
  return [policy](const Config& c) { return c.dist.fsdp.auto_wrap_policy == policy; };
}

// Written only when it differs from `unset`.
template <class T>
OptionSpec unless(OptionSpec spec, T FsdpConfig::*member, T unset) {
  auto load = spec.load;
  spec.load = [load, member, unset](const Config& c) -> std::optional<std::string> {
    return c.dist.fsdp.*member == unset ? std::nullopt : load(c);
  };
  return spec;
}

void check(const Config& c) {
  const FsdpConfig& f = c.dist.fsdp;
  ACC_CHECK(f.size >= 0, "fsdp_config.fsdp_size: must be >= 0 (got ", f.size, ")");
  ACC_CHECK(f.quantize_block >= 16, "fsdp_config.fsdp_quantize_block: must be >= 16 (got ", f.quantize_block, ")");
  ACC_CHECK(f.quantize_gradients == 0 || f.quantize_gradients == 8 || f.quantize_gradients == 4,
            "fsdp_config.fsdp_quantize_gradients: ", f.quantize_gradients, " bits; expected 8 (int8), 4 (int4) or 0 (none)");
  ACC_CHECK(!(f.quantize_gradients && f.reduce_bf16), "fsdp_config.fsdp_quantize_gradients: int",
            f.quantize_gradients, " reduces in f32 inside a node and sends int", f.quantize_gradients,
            " across nodes; it does not combine with fsdp_reduce_dtype: bf16");
  ACC_CHECK(f.quantize_gradients != 4 || f.quantize_block % 2 == 0,
            "fsdp_config.fsdp_quantize_block: int4 packs two values a byte, so a block must be even (got ",
            f.quantize_block, ")");
  ACC_CHECK(f.bucket_mb >= 0, "fsdp_config.fsdp_bucket_mb: must be >= 0 (got ", f.bucket_mb, ")");
  ACC_CHECK(f.min_num_params >= 0, "fsdp_config.fsdp_min_num_params: must be >= 0 (got ", f.min_num_params, ")");
  ACC_CHECK(f.wrap_fn || f.effective_wrap_policy() != WrapPolicy::SIZE_BASED_WRAP || f.min_num_params > 0,
            "fsdp_config.fsdp_min_num_params: SIZE_BASED_WRAP needs a value > 0");
}

std::optional<std::string> strategy_of(const Config& c) {
  if (c.dist.distributed_type == DistributedType::NO) return "NO_SHARD";  // a plain run is NO_SHARD on its ranks
  if (c.dist.distributed_type == DistributedType::FSDP) return to_string(c.dist.fsdp.sharding_strategy);
  return std::nullopt;
}

// A model that declares its blocks (models::Structure::block_types) is wrapped by them unless the
// config chose a policy: what a training program of acc's models runs.
void wrap_declared_blocks(Config& c) {
  FsdpConfig& fsdp = c.dist.fsdp;
  if (fsdp.effective_wrap_policy() != WrapPolicy::NO_WRAP || fsdp.auto_wrap_policy_set) return;
  fsdp.auto_wrap_policy = WrapPolicy::TRANSFORMER_BASED_WRAP;
  fsdp.auto_wrap_policy_set = true;
}

}  // namespace

OptionSection option_section() {
  using T = OptionType;
  OptionSpec policy = enum_key<WrapPolicy>(
      {.key = "fsdp_auto_wrap_policy",
       .default_value = "NO_WRAP",
       .help = "which modules become units; unset: TRANSFORMER_BASED_WRAP when classes are named, "
               "SIZE_BASED_WRAP with fsdp_min_num_params, else NO_WRAP",
       .question = "Auto wrap policy: TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP or NO_WRAP?",
       .suggest = offer("TRANSFORMER_BASED_WRAP")},
      &FsdpConfig::auto_wrap_policy, parse_wrap_policy);
  policy.store = [](Config& c, const std::string& text, const std::string& full_key) {
    c.dist.fsdp.auto_wrap_policy = parse_wrap_policy(text, full_key);
    c.dist.fsdp.auto_wrap_policy_set = true;
  };
  policy.load = [](const Config& c) -> std::optional<std::string> {
    if (!c.dist.fsdp.auto_wrap_policy_set) return std::nullopt;
    return to_string(c.dist.fsdp.auto_wrap_policy);
  };

  OptionSpec classes = key({.key = "fsdp_transformer_layer_cls_to_wrap",
                            .type = T::name_list,
                            .default_value = "[]",
                            .help = "block classes that become units (empty: the blocks the model declares)",
                            .question = "Block classes to wrap, comma-separated (empty line: the blocks the model declares)?",
                            .suggest = offer("\"\""),
                            .ask_when = when_policy(WrapPolicy::TRANSFORMER_BASED_WRAP)},
                           &FsdpConfig::wrap_layer_cls);
  classes.load = [](const Config& c) -> std::optional<std::string> {
    return util::join(c.dist.fsdp.wrap_layer_cls, ",");  // as accelerate writes it
  };

  // true/false (every unit), or the classes whose modules keep only their inputs.
  OptionSpec checkpointing{.key = "fsdp_activation_checkpointing",
                           .type = T::custom,
                           .default_value = "false",
                           .help = "true: every unit but the root keeps only its input; or a list of module classes",
                           .question = "Activation checkpointing?"};
  checkpointing.store = [](Config& c, const std::string& text, const std::string& full_key) {
    FsdpConfig& f = c.dist.fsdp;
    if (const auto every_unit = boolean_of(text)) {
      f.activation_checkpointing = *every_unit;
      f.activation_checkpointing_cls.clear();
      return;
    }
    f.activation_checkpointing_cls = names_of(OptionSpec{.type = T::name_list}.checked(text, full_key));
    f.activation_checkpointing = false;
  };
  checkpointing.load = [](const Config& c) -> std::optional<std::string> {
    const FsdpConfig& f = c.dist.fsdp;
    if (f.activation_checkpointing_cls.empty()) return f.activation_checkpointing ? "true" : "false";
    return list_text(f.activation_checkpointing_cls);
  };

  OptionSpec reduce_dtype = two_way({.key = "fsdp_reduce_dtype",
                                     .default_value = "f32",
                                     .allowed = {"f32", "bf16"},
                                     .help = "dtype of the gradient reductions (f32 as PyTorch's MixedPrecision, or bf16)"},
                                    &FsdpConfig::reduce_bf16, true);
  OptionSpec quantize_weights = two_way({.key = "fsdp_quantize_weights",
                                         .default_value = "none",
                                         .allowed = {"none", "int8"},
                                         .help = "int8: training gathers send weights block-quantized to int8 "
                                                 "(ZeRO++'s qwZ): a quarter of f32's bytes, half of bf16's"},
                                        &FsdpConfig::quantize_weights);
  OptionSpec quantize_gradients{.key = "fsdp_quantize_gradients",
                                .type = T::choice,
                                .default_value = "none",
                                .allowed = {"none", "int8", "int4"},
                                .help = "int8 or int4: gradient reductions across nodes send that (ZeRO++'s qgZ), "
                                        "after a reduction inside the node in f32"};
  quantize_gradients.store = [](Config& c, const std::string& text, const std::string&) {
    c.dist.fsdp.quantize_gradients = text == "int8" ? 8 : text == "int4" ? 4 : 0;
  };
  quantize_gradients.load = [](const Config& c) -> std::optional<std::string> {
    const int bits = c.dist.fsdp.quantize_gradients;
    if (bits == 0) return std::nullopt;
    return "int" + std::to_string(bits);
  };
  OptionSpec reshard = two_way({.key = "fsdp_reshard_after_forward",
                                .default_value = "true",
                                .allowed = {"true", "node"},
                                .help = "FULL_SHARD: after a unit's forward, back to the shards (true) or to a copy "
                                        "sharded within the node (node: ZeRO++'s hpZ, the backward gathers inside it)"},
                               &FsdpConfig::reshard_to_node);

  OptionSpec memory_limit = unless(key({.key = "fsdp_memory_limit",
                                        .type = T::size,
                                        .help = "bytes one rank may use, AUTO's budget (e.g. 8GiB); unset: the "
                                                "rank's share of physical memory"},
                                       &FsdpConfig::memory_limit),
                                   &FsdpConfig::memory_limit, int64_t{0});

  OptionSpec version{.key = "fsdp_version", .type = T::integer, .default_value = "1",
                     .help = "PyTorch's FSDP version; acc implements version 1 (others are ignored with a warning)"};
  version.store = [](Config& c, const std::string& text, const std::string& full_key) {
    if (text != "1") c.warnings.push_back("config key '" + full_key + "' = " + text + " is ignored (acc implements FSDP version 1)");
  };
  version.load = [](const Config&) -> std::optional<std::string> { return std::nullopt; };

  return {
      .name = "fsdp_config",
      .distributed_type = "FSDP",
      .options =
          {
              key({.key = "fsdp_size", .type = T::integer, .default_value = "0", .min = 0,
                   .help = "ranks one shard group spans; 0: all of them (the node for the hybrids)"},
                  &FsdpConfig::size),
              enum_key<ShardingStrategy>(
                  {.key = "fsdp_sharding_strategy",
                   .default_value = "FULL_SHARD",
                   .help = "what is sharded and when it is gathered; AUTO: the least communication that fits "
                           "fsdp_memory_limit",
                   .question = "Sharding strategy: FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, "
                               "HYBRID_SHARD_ZERO2 (or 1-5)?"},
                  &FsdpConfig::sharding_strategy, parse_sharding_strategy),
              policy,
              classes,
              key({.key = "fsdp_min_num_params", .type = T::integer, .default_value = "0", .min = 0,
                   .help = "SIZE_BASED_WRAP: parameters a unit holds at least",
                   .question = "Minimum parameters per unit?",
                   .suggest = offer("100000000"),
                   .ask_when = when_policy(WrapPolicy::SIZE_BASED_WRAP)},
                  &FsdpConfig::min_num_params),
              unless(key({.key = "fsdp_ignored_modules", .type = T::name_list, .default_value = "[]",
                          .help = "modules (qualified names; a list, or separated by commas) whose parameters stay "
                                  "whole on every rank"},
                         &FsdpConfig::ignored_modules),
                     &FsdpConfig::ignored_modules, std::vector<std::string>{}),
              enum_key<BackwardPrefetch>(
                  {.key = "fsdp_backward_prefetch",
                   .default_value = "BACKWARD_PRE",
                   .help = "when the backward gathers the next unit",
                   .question = "Backward prefetch: BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH?",
                   .aliases = {"fsdp_backward_prefetch_policy"}},  // older accelerate's name
                  &FsdpConfig::backward_prefetch, parse_backward_prefetch),
              key({.key = "fsdp_forward_prefetch", .type = T::boolean, .default_value = "false",
                   .help = "gather the next unit while the forward runs this one",
                   .question = "Forward prefetch?"},
                  &FsdpConfig::forward_prefetch),
              key({.key = "fsdp_offload_params", .type = T::boolean, .default_value = "false",
                   .help = "masters, gradients and optimizer state in the offload memory tier",
                   .question = "Offload parameters and optimizer state to CPU memory?"},
                  &FsdpConfig::offload_params),
              unless(key({.key = "fsdp_offload_dir", .type = T::text,
                          .help = "masters, gradients and optimizer state in files under this directory (implies "
                                  "fsdp_offload_params)",
                          .question = "Directory for file-backed offload of masters, gradients and optimizer state "
                                      "(empty line: keep them in memory)?",
                          .suggest = offer("\"\""),
                          .ask_when = [](const Config& c) { return c.dist.fsdp.offload_params; }},
                         &FsdpConfig::offload_dir),
                     &FsdpConfig::offload_dir, std::string()),
              enum_key<StateDictType>(
                  {.key = "fsdp_state_dict_type",
                   .default_value = "SHARDED_STATE_DICT",
                   .help = "checkpoints: a shard per rank, or one whole model file",
                   .question = "State dict type for checkpoints: SHARDED_STATE_DICT or FULL_STATE_DICT?"},
                  &FsdpConfig::state_dict_type, parse_state_dict_type),
              key({.key = "fsdp_sync_module_states", .type = T::boolean, .default_value = "false",
                   .help = "broadcast rank 0's parameters before sharding",
                   .question = "Synchronise module states from rank 0 at start?"},
                  &FsdpConfig::sync_module_states),
              key({.key = "fsdp_cpu_ram_efficient_loading", .type = T::boolean, .default_value = "false",
                   .help = "each rank makes only its shards of the model (deferred initialisation)",
                   .question = "CPU-RAM-efficient loading (each rank builds only its shard)?"},
                  &FsdpConfig::cpu_ram_efficient_loading),
              checkpointing,
              key({.key = "fsdp_use_orig_params", .type = T::boolean, .default_value = "true",
                   .help = "parameters keep their names and shapes (acc always does)"},
                  &FsdpConfig::use_orig_params),
              reduce_dtype,
              unless(key({.key = "fsdp_vocab_parallel", .type = T::boolean, .default_value = "true",
                          .help = "a causal LM's embedding and head stay split by vocabulary rows"},
                         &FsdpConfig::vocab_parallel),
                     &FsdpConfig::vocab_parallel, true),
              memory_limit,
              unless(key({.key = "fsdp_bucket_mb", .type = T::number, .default_value = "25", .min = 0,
                          .help = "MiB of f32 gradient one reduction carries at most: a unit's parameters "
                                  "are reduced together in buckets this size (0: each unit's in one)"},
                         &FsdpConfig::bucket_mb),
                     &FsdpConfig::bucket_mb, FsdpConfig{}.bucket_mb),
              quantize_weights,
              quantize_gradients,
              reshard,
              unless(key({.key = "fsdp_quantize_block", .type = T::integer, .default_value = "256", .min = 16,
                          .help = "fsdp_quantize_weights, fsdp_quantize_gradients: elements that share one scale"},
                         &FsdpConfig::quantize_block),
                     &FsdpConfig::quantize_block, FsdpConfig{}.quantize_block),
              version,
          },
      .check_config = check,
      .strategy_of = strategy_of,
      .full_checkpoints = full_checkpoints,
      .deferred_init = deferred_init,
      .memory_limit = [](const Config& c) { return c.dist.fsdp.memory_limit; },
      .summary = [](const Config& c) { return to_string(c.dist.fsdp.effective_wrap_policy()); },
      .program_defaults = wrap_declared_blocks,
  };
}

}  // namespace acc::fsdp
