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

// A true/false key whose value changes nothing for acc.
Reader checked_bool_key() {
  return [](const YAML::Node& v, const std::string& key) { scalar_as<bool>(v, key, "true or false"); };
}

Reader not_applicable_key(std::vector<std::string>& keys) {
  return [&keys](const YAML::Node&, const std::string& key) { keys.push_back(key); };
}

// A value as text a plugin section's spec can check: scalars as written, lists in flow style.
std::string value_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  YAML::Emitter out;
  out << YAML::Flow << node;
  return out.c_str();
}

// Sets `key` (or an alias) of `section` from text as a file spells it: into the typed fields
// of `c` for a section that lives there, else into c.sections.
void set_section_key(Config& c, const OptionSection& section, const std::string& key, const std::string& text) {
  if (!section.in_config_fields()) return c.section(section.name).set(key, text);
  const OptionSpec* spec = section.find(key);
  if (!spec) section.fail_unknown_key(key);
  const std::string full_key = section.name + "." + key;
  spec->store(c, spec->checked(text, full_key), full_key);
}

// A plugin's section (`diloco_config:`, `fsdp_config:`) into c; false when no plugin declares
// `name`.
bool read_plugin_section(Config& c, const std::string& name, const YAML::Node& node) {
  const auto section = find_option_section(name);
  if (!section) return false;
  if (!node.IsNull() && !node.IsMap()) bad_value(node, name, "a mapping of keys");
  if (section->in_config_fields()) {
    if (node.IsMap())
      for (const auto& item : node) {
        const std::string key = shown(item.first);
        if (!section->find(key)) section->fail_unknown_key(key);
        // `key:` or `key: null` chooses nothing, as accelerate reads it.
        if (!item.second.IsNull()) set_section_key(c, *section, key, value_text(item.second));
      }
    return true;
  }
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

// Every key of a file's top level: one of `keys`, or a plugin's section (read into c).
void read_top_level(const YAML::Node& root, const Section& keys, Config& c) {
  for (const auto& item : root) {
    const std::string name = shown(item.first);
    const auto it = keys.find(name);
    if (it == keys.end()) {
      if (read_plugin_section(c, name, item.second)) continue;
      std::vector<std::string> known(std::views::keys(keys).begin(), std::views::keys(keys).end());
      for (const auto& section : all_option_sections()) known.push_back(section->name);
      ACC_FAIL("unknown key '", name, "' (known top-level keys: ", util::join(known),
               "); a plugin's option section is known when its plugin is on ACC_PLUGIN_PATH");
    }
    // `key:` or `key: null` chooses nothing, as accelerate reads it.
    if (!item.second.IsNull()) it->second(item.second, name);
  }
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
      {"distributed_type",
       [&c](const YAML::Node& v, const std::string& key) {
         try {
           enum_key(c.dist.distributed_type, parse_distributed_type)(v, key);
         } catch (const Error& e) {  // a plugin's strategy given where a family goes: say where it goes
           const std::string name = util::upper(v.IsScalar() ? v.Scalar() : "");
           for (const auto& section : all_option_sections())
             if (std::ranges::find(section->strategies, name) != section->strategies.end())
               ACC_FAIL(e.what(), "; ", name, " is a plugin's strategy: give it as `strategy: ", name, "`");
           throw;
         }
       }},
      {"mixed_precision", named_bool_key(c.compute.bf16, kMixedPrecision)},
      {"num_processes", int_key(c.dist.num_processes, 1)},
      {"num_machines", int_key(c.dist.num_machines, 1)},
      {"machine_rank", int_key(c.dist.machine_rank, 0)},
      // Checked, and honoured by what acc always does whatever they say: it computes on CPUs,
      // and mpirun reaches the other machines whether or not they share a network.
      {"use_cpu", checked_bool_key()},
      {"same_network", checked_bool_key()},
      {"strategy", string_key(c.dist.strategy)},
  };
  for (const char* key : kNotApplicableKeys) keys.emplace(key, not_applicable_key(c.not_applicable_keys));
  return keys;
}

Config parse(const YAML::Node& root) {
  Config c;
  if (root.IsNull()) return c;  // an empty file: the defaults
  ACC_CHECK(root.IsMap(), "expected a mapping of config keys, got '", shown(root), "'");
  read_top_level(root, top_keys(c), c);
  for (const auto& section : all_option_sections()) {
    const YAML::Node node = root[section->name];
    if (!node.IsDefined() || !node.IsMap() || node.size() == 0 || c.strategy_reads(section->name)) continue;
    std::vector<std::string> keys;
    for (const auto& item : node) keys.push_back(item.first.as<std::string>());
    c.warnings.push_back(c.unread_section_warning(section->name, util::join(keys)));
  }
  return c;
}

template <class... Values>
void put(YAML::Emitter& out, const char* key, const Values&... values) {
  out << YAML::Key << key << YAML::Value;
  (out << ... << values);
}

// One key's value: text as a string, anything else as the YAML it spells (a list keeps the
// flow style of its text; YAML::Flow before a Node is not consumed by it and would turn the
// next mapping into flow style).
void put_value(YAML::Emitter& out, const OptionSpec& spec, const std::string& text) {
  if (spec.type == OptionType::text || text.empty()) return put(out, spec.key.c_str(), text);
  put(out, spec.key.c_str(), YAML::Load(text));
}

// Every key of a plugin's section, in the order the plugin declares them.
void put_plugin_section(YAML::Emitter& out, const std::string& name, const OptionValues& values) {
  put(out, name.c_str(), YAML::BeginMap);
  for (const auto& spec : values.section().options) put_value(out, spec, values.text(spec.key));
  out << YAML::EndMap;
}

// A section in typed fields: the keys its load gives, none when it gives none.
void put_field_section(YAML::Emitter& out, const OptionSection& section, const Config& c) {
  std::vector<std::pair<const OptionSpec*, std::string>> present;
  for (const auto& spec : section.options)
    if (auto text = spec.load(c)) present.emplace_back(&spec, std::move(*text));
  if (present.empty()) return;
  put(out, section.name.c_str(), YAML::BeginMap);
  for (const auto& [spec, text] : present) put_value(out, *spec, text);
  out << YAML::EndMap;
}

}  // namespace

std::vector<std::string> Config::keys() {
  Config c;
  std::vector<std::string> out;
  for (const auto& [name, _] : top_keys(c)) out.push_back(name);
  for (const auto& section : all_option_sections())
    for (const auto& spec : section->options) {
      out.push_back(section->name + "." + spec.key);
      for (const auto& alias : spec.aliases) out.push_back(section->name + "." + alias);
    }
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
  const Section top = top_keys(*this);
  if (const auto it = top.find(key); it != top.end()) return it->second(node, key);
  if (dot != std::string::npos) {  // a plugin's section named
    if (const auto section = find_option_section(key.substr(0, dot)))
      return set_section_key(*this, *section, name, value);
  } else {  // the plugin section holding it
    for (const auto& s : all_option_sections())
      if (s->find(name)) return set_section_key(*this, *s, name, value);
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
  // A typed section the strategy does not read (fsdp_config under PIPELINE) would only be noise.
  for (const auto& section : all_option_sections())
    if (section->in_config_fields() && strategy_reads(section->name)) put_field_section(out, *section, *this);
  for (const auto& [name, values] : sections) put_plugin_section(out, name, values);
  out << YAML::EndMap;
  ACC_CHECK(out.good(), "Config::to_yaml: ", out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

}  // namespace acc
