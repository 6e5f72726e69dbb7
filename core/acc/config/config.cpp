// acc::Config: where it comes from (ACC_CONFIG_FILE, a file), its checks, and the choices that
// follow from it. The YAML layout itself is in config_yaml.cpp.
#include "acc/config/config.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "acc/util/error.h"
#include "acc/util/log.h"
#include "acc/util/strings.h"

namespace acc {
namespace {

template <class T>
void check_at_least(const char* key, T value, T min) {
  ACC_CHECK(value >= min, key, ": must be >= ", min, " (got ", value, ")");
}

}  // namespace

WrapPolicy FsdpConfig::effective_wrap_policy() const {
  if (auto_wrap_policy_set) return auto_wrap_policy;
  if (!wrap_layer_cls.empty()) return WrapPolicy::TRANSFORMER_BASED_WRAP;
  return min_num_params > 0 ? WrapPolicy::SIZE_BASED_WRAP : WrapPolicy::NO_WRAP;
}

Config Config::load() {
  const char* path = std::getenv("ACC_CONFIG_FILE");
  if (path && *path) return from_file(path);
  const std::string fallback = default_path();
  return std::filesystem::is_regular_file(fallback) ? from_file(fallback) : Config{};
}

std::string Config::default_path() {
  if (const char* home = std::getenv("ACC_CONFIG_HOME"); home && *home)
    return (std::filesystem::path(home) / "default_config.yaml").string();
  const char* user = std::getenv("HOME");
  return (std::filesystem::path(user && *user ? user : ".") / ".cache" / "acc" / "default_config.yaml").string();
}

Config Config::parse_file(const std::string& path) {
  ACC_CHECK(std::filesystem::is_regular_file(path), path, ": no such config file");
  std::ifstream in(path);
  ACC_CHECK(in.is_open(), path, ": cannot open the config file");
  std::ostringstream text;
  text << in.rdbuf();
  return from_yaml(text.str(), path);
}

Config Config::from_file(const std::string& path) {
  Config config = parse_file(path);
  for (const auto& warning : config.warnings) log::warn("{}: {}", path, warning);
  if (!config.not_applicable_keys.empty())
    log::info("{}: {}", path, config.not_applicable_note());
  return config;
}

void Config::validate() const {
  check_at_least("num_processes", dist.num_processes, 1);
  check_at_least("num_machines", dist.num_machines, 1);
  ACC_CHECK(dist.machine_rank >= 0 && dist.machine_rank < dist.num_machines, "machine_rank: ", dist.machine_rank,
            " is not a machine of num_machines ", dist.num_machines, "; expected 0 to ", dist.num_machines - 1);
  for (const auto& section : all_option_sections())
    if (section->in_config_fields() && section->check_config) section->check_config(*this);
  for (const auto& [name, values] : sections) values.validate();
}

std::shared_ptr<const OptionSection> find_option_section(const std::string& name) {
  OptionSectionSource* source = option_section_source();
  return source ? source->find_section(name) : nullptr;
}

std::vector<std::shared_ptr<const OptionSection>> all_option_sections() {
  OptionSectionSource* source = option_section_source();
  return source ? source->sections() : std::vector<std::shared_ptr<const OptionSection>>{};
}

OptionValues Config::section(const std::string& name) const {
  if (const auto it = sections.find(name); it != sections.end()) return it->second;
  const auto section = find_option_section(name);
  ACC_CHECK(section, "no option section '", name, "': no plugin in the plugin folders declares it ",
            "(is the plugin that owns it on ACC_PLUGIN_PATH?)");
  OptionValues values(section);
  if (section->in_config_fields())  // its values as the typed fields hold them
    for (const auto& spec : section->options)
      if (auto text = spec.load(*this)) values.set(spec.key, *text);
  return values;
}

OptionValues& Config::section(const std::string& name) {
  if (!sections.count(name)) sections.emplace(name, std::as_const(*this).section(name));
  return sections.at(name);
}

std::string Config::not_applicable_note() const {
  return "keys of Hugging Face accelerate that do not apply to acc, accepted: " + util::join(not_applicable_keys);
}

std::shared_ptr<const OptionSection> Config::strategy_section() const {
  const auto sections = all_option_sections();
  for (const auto& section : sections)
    if (std::ranges::find(section->strategies, dist.strategy) != section->strategies.end()) return section;
  // Else the section whose strategy_of names the strategy the config runs (AUTO, core's own,
  // belongs to the section of the distributed_type that asks for it); a strategy no section
  // configures has none.
  for (const auto& section : sections) {
    if (!section->strategy_of) continue;
    const auto named = section->strategy_of(*this);
    if (named && (dist.strategy.empty() || dist.strategy == kAutoStrategy || *named == dist.strategy)) return section;
  }
  return nullptr;
}

bool Config::strategy_reads(const std::string& name) const {
  if (asks_for_auto()) return true;
  const auto running = strategy_section();
  // A strategy without a section (a plugin's that declares none) may read any.
  return !running || running->name == name ||
         std::ranges::find(running->also_reads, name) != running->also_reads.end();
}

std::string Config::unread_section_warning(const std::string& name, const std::string& keys) const {
  const auto running = strategy_section();
  return name + " (" + keys + ") is not read by " + strategy_name() + ", the strategy this config runs" +
         (running ? " (it reads " + running->name + ")" : "") + ": those keys change nothing";
}

std::string Config::strategy_name() const {
  if (!dist.strategy.empty()) return dist.strategy;
  std::vector<std::string> looked;
  for (const auto& section : all_option_sections()) {
    if (!section->strategy_of) continue;
    if (auto name = section->strategy_of(*this)) return *name;
    looked.push_back(section->name);
  }
  ACC_FAIL("distributed_type ", to_string(dist.distributed_type), ": no plugin's option section names the ",
           "strategy it runs (sections asked: ", looked.empty() ? "none" : util::join(looked),
           "; is the fsdp plugin in the plugin folders?)");
}

}  // namespace acc
