// acc::Config <-> YAML in Hugging Face accelerate's layout: which keys exist, what each one sets,
// and the same layout written back.
#include <yaml-cpp/yaml.h>

#include <functional>
#include <map>
#include <ranges>
#include <sstream>

#include "acc/config/config.h"
#include "acc/util/error.h"
#include "acc/util/strings.h"

namespace acc {
namespace {

// A bool that files spell as one of two names.
struct NamedBool {
  const char* off;
  const char* on;
  const char* name(bool value) const { return value ? on : off; }
};
constexpr NamedBool kMixedPrecision{"no", "bf16"};
constexpr NamedBool kReduceDtype{"f32", "bf16"};

// Keys Hugging Face accelerate writes that mean nothing for acc on CPUs with one mpirun (GPU,
// TPU, torch.compile, IPEX and rendezvous settings): accepted, and named once in one line.
constexpr const char* kNotApplicableKeys[] = {
    "debug",           "downcast_bf16",     "dynamo_config",          "enable_cpu_affinity",
    "gpu_ids",         "ipex_config",       "main_process_ip",        "main_process_port",
    "main_training_function", "mpirun_config", "rdzv_backend",        "tpu_env",
    "tpu_name",        "tpu_use_cluster",   "tpu_use_sudo",           "tpu_zone"};

// Reads one key's value into the Config being built; `key` is its full name for messages.
using Reader = std::function<void(const YAML::Node& value, const std::string& key)>;
using Section = std::map<std::string, Reader>;


// The value as the file wrote it, for messages.
std::string shown(const YAML::Node& node) {
  if (node.IsNull()) return "null";
  if (node.IsScalar()) return node.Scalar();
  return node.IsSequence() ? "<a list>" : "<a mapping>";
}

[[noreturn]] void bad_value(const YAML::Node& node, const std::string& key, const std::string& expected) {
  ACC_FAIL(key, ": bad value '", shown(node), "' (expected ", expected, ")");
}

template <class T>
T scalar_as(const YAML::Node& node, const std::string& key, const std::string& expected) {
  T value;
  if (!node.IsScalar() || !YAML::convert<T>::decode(node, value)) bad_value(node, key, expected);
  return value;
}

Reader bool_key(bool& target) {
  return [&target](const YAML::Node& v, const std::string& key) {
    target = scalar_as<bool>(v, key, "true or false");
  };
}

template <class T>
Reader int_key(T& target, T min) {
  return [&target, min](const YAML::Node& v, const std::string& key) {
    const std::string expected = "an integer >= " + std::to_string(min);
    const T value = scalar_as<T>(v, key, expected);
    if (value < min) bad_value(v, key, expected);
    target = value;
  };
}

Reader string_key(std::string& target) {
  return [&target](const YAML::Node& v, const std::string& key) {
    target = scalar_as<std::string>(v, key, "a string");
  };
}

// An enum: `parse` names the allowed values when the file's name is not one of them.
template <class E>
Reader enum_key(E& target, E (*parse)(const std::string&, const std::string&)) {
  return [&target, parse](const YAML::Node& v, const std::string& key) {
    target = parse(scalar_as<std::string>(v, key, "a name"), key);
  };
}

Reader named_bool_key(bool& target, NamedBool names) {
  return [&target, names](const YAML::Node& v, const std::string& key) {
    const std::string name = scalar_as<std::string>(v, key, "a name");
    ACC_CHECK(name == names.off || name == names.on, key, ": bad value '", name, "' (allowed: ", names.off,
              ", ", names.on, ")");
    target = name == names.on;
  };
}

template <class T>
Reader list_key(std::vector<T>& target, const std::string& item) {
  return [&target, item](const YAML::Node& v, const std::string& key) {
    if (!v.IsSequence()) bad_value(v, key, "a list, each " + item);
    target.clear();
    for (const auto& entry : v) target.push_back(scalar_as<T>(entry, key, item));
  };
}

// Class names as accelerate writes them ("GPT2Block,LlamaDecoderLayer") or as a YAML list.
Reader class_list_key(std::vector<std::string>& target) {
  return [&target](const YAML::Node& v, const std::string& key) {
    if (v.IsSequence()) return list_key(target, "a class name")(v, key);
    std::istringstream names(scalar_as<std::string>(v, key, "class names separated by commas"));
    target.clear();
    for (std::string name; std::getline(names, name, ',');)
      if (!util::trim(name).empty()) target.push_back(util::trim(name));
  };
}

// A true/false key whose value changes nothing for acc.
Reader checked_bool_key() {
  return [](const YAML::Node& v, const std::string& key) { scalar_as<bool>(v, key, "true or false"); };
}

Reader not_applicable_key(std::vector<std::string>& keys) {
  return [&keys](const YAML::Node&, const std::string& key) { keys.push_back(key); };
}

// The names of the plugin sections (every plugin of the search folders loaded).
std::vector<std::string> plugin_section_names() {
  std::vector<std::string> names;
  if (OptionSectionSource* source = option_section_source())
    for (const auto& section : source->sections()) names.push_back(section->name);
  return names;
}

// Reads a key no built-in reader has; false when it is not one.
using OtherKey = std::function<bool(const std::string& name, const YAML::Node& value)>;

// Every key of `node` must be one of `keys` (or one `other` reads); `section` prefixes the
// names in messages.
void read_section(const YAML::Node& node, const std::string& section, const Section& keys,
                  const OtherKey& other = {}) {
  if (!node.IsMap()) bad_value(node, section, "a mapping of keys");
  for (const auto& item : node) {
    const std::string name = shown(item.first);
    const std::string key = section.empty() ? name : section + "." + name;
    const auto it = keys.find(name);
    if (it == keys.end() && other && other(name, item.second)) continue;
    if (it == keys.end()) {
      std::vector<std::string> known(std::views::keys(keys).begin(), std::views::keys(keys).end());
      if (other) {
        const auto plugin_sections = plugin_section_names();
        known.insert(known.end(), plugin_sections.begin(), plugin_sections.end());
      }
      ACC_FAIL("unknown key '", key, "' (known ", section.empty() ? "top-level" : section, " keys: ",
               util::join(known), ")",
               other ? "; a plugin's option section is known when its plugin is on ACC_PLUGIN_PATH" : "");
    }
    // `key:` or `key: null` chooses nothing, as accelerate reads it.
    if (!item.second.IsNull()) it->second(item.second, key);
  }
}

// A value as text a plugin section's spec can check: scalars as written, lists in flow style.
std::string value_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

// A plugin's section (`diloco_config:`) into c.sections; false when no plugin declares `name`.
bool read_plugin_section(Config& c, const std::string& name, const YAML::Node& node) {
  const auto section = find_option_section(name);
  if (!section) return false;
  if (!node.IsNull() && !node.IsMap()) bad_value(node, name, "a mapping of keys");
  OptionValues values(section);
  if (node.IsMap())
    for (const auto& item : node) {
      const std::string key = shown(item.first);
      if (item.second.IsNull())
        values.text(key);  // chooses nothing; the key must exist all the same
      else
        values.set(key, value_text(item.second));
    }
  c.sections.insert_or_assign(name, std::move(values));
  return true;
}

Reader section_key(Section keys) {
  return
      [keys = std::move(keys)](const YAML::Node& v, const std::string& key) { read_section(v, key, keys); };
}

Section fsdp_keys(Config& c) {
  FsdpConfig& f = c.dist.fsdp;
  const Reader backward_prefetch = enum_key(f.backward_prefetch, parse_backward_prefetch);
  return {
      {"fsdp_sharding_strategy", enum_key(f.sharding_strategy, parse_sharding_strategy)},
      {"fsdp_auto_wrap_policy",
       [&f](const YAML::Node& v, const std::string& key) {
         enum_key(f.auto_wrap_policy, parse_wrap_policy)(v, key);
         f.auto_wrap_policy_set = true;
       }},
      {"fsdp_transformer_layer_cls_to_wrap", class_list_key(f.wrap_layer_cls)},
      {"fsdp_min_num_params", int_key(f.min_num_params, int64_t{0})},
      {"fsdp_ignored_modules", list_key(f.ignored_modules, "a module name")},
      {"fsdp_backward_prefetch", backward_prefetch},
      {"fsdp_backward_prefetch_policy", backward_prefetch},  // older accelerate's name
      {"fsdp_forward_prefetch", bool_key(f.forward_prefetch)},
      {"fsdp_offload_params", bool_key(f.offload_params)},
      {"fsdp_offload_dir", string_key(f.offload_dir)},
      {"fsdp_state_dict_type", enum_key(f.state_dict_type, parse_state_dict_type)},
      {"fsdp_sync_module_states", bool_key(f.sync_module_states)},
      {"fsdp_cpu_ram_efficient_loading", bool_key(f.cpu_ram_efficient_loading)},
      {"fsdp_activation_checkpointing",
       [&f](const YAML::Node& v, const std::string& key) {
         bool every_unit = false;  // true/false, or the classes to checkpoint
         if (v.IsScalar() && YAML::convert<bool>::decode(v, every_unit)) {
           f.activation_checkpointing = every_unit;
           f.activation_checkpointing_cls.clear();
         } else {
           class_list_key(f.activation_checkpointing_cls)(v, key);
           f.activation_checkpointing = false;
         }
       }},
      {"fsdp_use_orig_params", bool_key(f.use_orig_params)},
      {"fsdp_size", int_key(f.size, 0)},
      {"fsdp_reduce_dtype", named_bool_key(f.reduce_bf16, kReduceDtype)},
      {"fsdp_vocab_parallel", bool_key(f.vocab_parallel)},
      {"fsdp_memory_limit",
       [&f](const YAML::Node& v, const std::string& key) {
         const auto bytes = util::parse_bytes(scalar_as<std::string>(v, key, "a size"));
         if (!bytes) bad_value(v, key, "a size such as 8GiB, 512MB or a number of bytes");
         f.memory_limit = *bytes;
       }},
      {"fsdp_version",
       [&c](const YAML::Node& v, const std::string& key) {
         if (scalar_as<int>(v, key, "an integer") != 1)
           c.warnings.push_back("config key '" + key + "' = " + v.Scalar() +
                                " is ignored (acc implements FSDP version 1)");
       }},
  };
}

Section spmd_keys(SpmdConfig& s) {
  return {
      {"mesh_shape", list_key(s.mesh_shape, "an integer")},
      {"axis_names", list_key(s.axis_names, "a string")},
      {"sharding_rules", string_key(s.sharding_rules)},
  };
}

Section top_keys(Config& c) {
  Section keys = {
      {"compute_environment",
       [&c](const YAML::Node& v, const std::string& key) {
         const std::string env = scalar_as<std::string>(v, key, "a string");
         if (env != "LOCAL_MACHINE")
           c.warnings.push_back("config key '" + key + "' = '" + env +
                                "' is not used by acc (ignored; acc runs on the local machine)");
       }},
      {"distributed_type", enum_key(c.dist.distributed_type, parse_distributed_type)},
      {"mixed_precision", named_bool_key(c.compute.bf16, kMixedPrecision)},
      {"num_processes", int_key(c.dist.num_processes, 1)},
      {"num_machines", int_key(c.dist.num_machines, 1)},
      {"machine_rank", int_key(c.dist.machine_rank, 0)},
      // Checked, and honoured by what acc always does whatever they say: it computes on CPUs,
      // and mpirun reaches the other machines whether or not they share a network.
      {"use_cpu", checked_bool_key()},
      {"same_network", checked_bool_key()},
      {"strategy", string_key(c.dist.strategy)},
      {"fsdp_config", section_key(fsdp_keys(c))},
      {"spmd_config", section_key(spmd_keys(c.dist.spmd))},
  };
  for (const char* key : kNotApplicableKeys) keys.emplace(key, not_applicable_key(c.not_applicable_keys));
  return keys;
}

Config parse(const YAML::Node& root) {
  Config c;
  if (root.IsNull()) return c;  // an empty file: the defaults
  ACC_CHECK(root.IsMap(), "expected a mapping of config keys, got '", shown(root), "'");
  read_section(root, "", top_keys(c),
               [&c](const std::string& name, const YAML::Node& value) { return read_plugin_section(c, name, value); });
  return c;
}

template <class... Values>
void put(YAML::Emitter& out, const char* key, const Values&... values) {
  out << YAML::Key << key << YAML::Value;
  (out << ... << values);
}

void put_fsdp(YAML::Emitter& out, const FsdpConfig& f) {
  put(out, "fsdp_config", YAML::BeginMap);
  put(out, "fsdp_size", f.size);
  put(out, "fsdp_sharding_strategy", to_string(f.sharding_strategy));
  if (f.auto_wrap_policy_set) put(out, "fsdp_auto_wrap_policy", to_string(f.auto_wrap_policy));
  put(out, "fsdp_transformer_layer_cls_to_wrap", util::join(f.wrap_layer_cls, ","));
  put(out, "fsdp_min_num_params", f.min_num_params);
  if (!f.ignored_modules.empty()) put(out, "fsdp_ignored_modules", YAML::Flow, f.ignored_modules);
  put(out, "fsdp_backward_prefetch", to_string(f.backward_prefetch));
  put(out, "fsdp_forward_prefetch", f.forward_prefetch);
  put(out, "fsdp_offload_params", f.offload_params);
  if (!f.offload_dir.empty()) put(out, "fsdp_offload_dir", f.offload_dir);
  put(out, "fsdp_state_dict_type", to_string(f.state_dict_type));
  put(out, "fsdp_sync_module_states", f.sync_module_states);
  put(out, "fsdp_cpu_ram_efficient_loading", f.cpu_ram_efficient_loading);
  if (f.activation_checkpointing_cls.empty())
    put(out, "fsdp_activation_checkpointing", f.activation_checkpointing);
  else
    put(out, "fsdp_activation_checkpointing", YAML::Flow, f.activation_checkpointing_cls);
  put(out, "fsdp_use_orig_params", f.use_orig_params);
  put(out, "fsdp_reduce_dtype", kReduceDtype.name(f.reduce_bf16));
  if (!f.vocab_parallel) put(out, "fsdp_vocab_parallel", false);
  if (f.memory_limit > 0) put(out, "fsdp_memory_limit", f.memory_limit);
  out << YAML::EndMap;
}

void put_spmd(YAML::Emitter& out, const SpmdConfig& s) {
  put(out, "spmd_config", YAML::BeginMap);
  put(out, "mesh_shape", YAML::Flow, s.mesh_shape);
  put(out, "axis_names", YAML::Flow, s.axis_names);
  put(out, "sharding_rules", s.sharding_rules);
  out << YAML::EndMap;
}

// Every key of a plugin's section, in the order the plugin declares them.
void put_plugin_section(YAML::Emitter& out, const std::string& name, const OptionValues& values) {
  put(out, name.c_str(), YAML::BeginMap);
  for (const auto& spec : values.section().options) {
    const std::string& text = values.text(spec.key);
    if (spec.type == OptionType::text)
      put(out, spec.key.c_str(), text);
    else
      put(out, spec.key.c_str(), YAML::Flow, YAML::Load(text));
  }
  out << YAML::EndMap;
}

}  // namespace

std::vector<std::string> Config::keys() {
  Config c;
  std::vector<std::string> out;
  for (const auto& [name, _] : top_keys(c)) {
    if (name == "fsdp_config" || name == "spmd_config") continue;
    out.push_back(name);
  }
  for (const auto& [name, _] : fsdp_keys(c)) out.push_back("fsdp_config." + name);
  for (const auto& [name, _] : spmd_keys(c.dist.spmd)) out.push_back("spmd_config." + name);
  if (OptionSectionSource* source = option_section_source())
    for (const auto& section : source->sections())
      for (const auto& spec : section->options) out.push_back(section->name + "." + spec.key);
  return out;
}

void Config::set(const std::string& key, const std::string& value) {
  const auto dot = key.find('.');
  const std::string name = dot == std::string::npos ? key : key.substr(dot + 1);
  YAML::Node node;
  try {
    node = YAML::Load(value);
  } catch (const YAML::Exception&) {
    node = YAML::Node(value);  // not YAML on its own (e.g. "a: b:"): the text as a string
  }
  if (node.IsNull()) node = YAML::Node(value);
  for (const auto& [section, keys] : {std::pair<std::string, Section>{"", top_keys(*this)},
                                      {"fsdp_config", fsdp_keys(*this)},
                                      {"spmd_config", spmd_keys(dist.spmd)}}) {
    if (dot != std::string::npos && key.substr(0, dot) != section) continue;
    const auto it = keys.find(name);
    if (it == keys.end() || name == "fsdp_config" || name == "spmd_config") continue;
    it->second(node, section.empty() ? name : section + "." + name);
    return;
  }
  if (dot != std::string::npos) {  // a plugin's section named
    if (find_option_section(key.substr(0, dot))) return this->section(key.substr(0, dot)).set(name, value);
  } else if (OptionSectionSource* source = option_section_source()) {  // the plugin section holding it
    for (const auto& s : source->sections())
      if (s->find(name)) return this->section(s->name).set(name, value);
  }
  const auto known = keys();
  ACC_FAIL("unknown config key '", key, "' (known: ", util::join(known), ")");
}

Config Config::from_yaml(const std::string& text, const std::string& source) {
  try {
    return parse(YAML::Load(text));
  } catch (const Error& e) {
    ACC_FAIL(source, ": ", e.what());
  } catch (const YAML::Exception& e) {
    ACC_FAIL(source, ": not valid YAML: ", e.what());
  }
}

std::string Config::to_yaml() const {
  YAML::Emitter out;
  out << YAML::BeginMap;
  put(out, "distributed_type", to_string(dist.distributed_type));
  // Quoted as accelerate writes it: YAML 1.1 readers (PyYAML) take a plain `no` for false.
  put(out, "mixed_precision", YAML::SingleQuoted, kMixedPrecision.name(compute.bf16));
  put(out, "num_processes", dist.num_processes);
  put(out, "num_machines", dist.num_machines);
  if (dist.machine_rank != 0) put(out, "machine_rank", dist.machine_rank);
  if (!dist.strategy.empty()) put(out, "strategy", dist.strategy);
  put_fsdp(out, dist.fsdp);
  const SpmdConfig& s = dist.spmd;
  if (!s.mesh_shape.empty() || !s.axis_names.empty() || !s.sharding_rules.empty()) put_spmd(out, s);
  for (const auto& [name, values] : sections) put_plugin_section(out, name, values);
  out << YAML::EndMap;
  ACC_CHECK(out.good(), "Config::to_yaml: ", out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

}  // namespace acc
