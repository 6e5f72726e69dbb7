#include "acc/spmd/sharding_rules.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "acc/util/error.h"
#include "acc/util/strings.h"

namespace acc::spmd {

namespace {

// Splits "model.layers.*[0]" into the pattern and the index; -1 without a suffix.
std::pair<std::string, int> split_index(const std::string& key, const std::string& where) {
  if (key.empty() || key.back() != ']') return {key, -1};
  const size_t open = key.rfind('[');
  const std::string digits = open == std::string::npos ? "" : key.substr(open + 1, key.size() - open - 2);
  ACC_CHECK(!digits.empty() && std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); }),
            where, ": a key may end in [i] with i an integer (the element of a tuple output), got '", key, "'");
  return {key.substr(0, open), std::stoi(digits)};
}

}  // namespace

bool name_matches(const std::string& pattern, const std::string& name) {
  size_t p = 0, n = 0;
  while (p < pattern.size()) {
    if (pattern[p] == '*') {
      const size_t start = n;
      while (n < name.size() && std::isdigit(static_cast<unsigned char>(name[n]))) ++n;
      if (n == start) return false;
      ++p;
    } else {
      if (n >= name.size() || name[n] != pattern[p]) return false;
      ++p;
      ++n;
    }
  }
  return n == name.size();
}

ShardingRules ShardingRules::from_file(const std::string& path) {
  ACC_CHECK(std::filesystem::is_regular_file(path), "sharding rules: no file '", path,
            "' (spmd_config.sharding_rules names a YAML file of name: partition spec)");
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

ShardingRules ShardingRules::parse(const std::string& yaml, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    ACC_FAIL("sharding rules ", source, ": not valid YAML: ", e.what());
  }
  ShardingRules rules;
  rules.source_ = source;
  if (root.IsNull()) return rules;  // an empty file: no rules
  ACC_CHECK(root.IsMap(), "sharding rules ", source,
            ": expected a map of parameter or module names to partition specs (e.g. "
            "'model.layers.*.self_attn.q_proj.weight: [fsdp, null]')");
  for (const auto& entry : root) {
    const std::string key = entry.first.as<std::string>();
    const std::string where = "sharding rules " + source + ", key '" + key + "'";
    auto [pattern, index] = split_index(key, where);
    for (const auto& earlier : rules.rules_)
      ACC_CHECK(earlier.key != key, where, ": appears twice");
    rules.rules_.push_back({key, pattern, index, parse_partition_spec(entry.second, where)});
  }
  return rules;
}

const ShardingRule* ShardingRules::find(const std::string& name) const {
  for (const auto& rule : rules_)
    if (name_matches(rule.pattern, name)) return &rule;
  return nullptr;
}

void ShardingRules::rename_axis(const std::string& from, const std::string& to) {
  for (auto& rule : rules_) {
    const auto axes = rule.spec.axes();
    const bool both = std::find(axes.begin(), axes.end(), from) != axes.end() &&
                      std::find(axes.begin(), axes.end(), to) != axes.end();
    ACC_CHECK(!both, "sharding rules ", source_, ", key '", rule.key, "': spec ", rule.spec.to_string(), " names '",
              from, "' and '", to, "', two names of one axis: it would split two dimensions over it");
    for (auto& dim : rule.spec.dims) std::replace(dim.begin(), dim.end(), from, to);
  }
}

ResolvedSharding ShardingRules::resolve(const std::vector<std::pair<std::string, Shape>>& parameters,
                                        const std::vector<std::string>& modules,
                                        const std::vector<std::string>& axis_names,
                                        const std::optional<std::string>& fallback_axis) const {
  for (const auto& rule : rules_)
    for (const auto& axis : rule.spec.axes())
      ACC_CHECK(std::find(axis_names.begin(), axis_names.end(), axis) != axis_names.end(), "sharding rules ",
                source_, ", key '", rule.key, "': spec ", rule.spec.to_string(), " names axis '", axis,
                "', which the mesh does not have (its axes: ", util::join(axis_names), ")");
  ResolvedSharding out;
  std::vector<bool> used(rules_.size(), false);
  for (const auto& [name, shape] : parameters) {
    const ShardingRule* rule = find(name);
    if (!rule) {
      PartitionSpec whole{std::vector<std::vector<std::string>>(shape.size())};
      out.parameters.emplace_back(name, fallback_axis ? first_dim_on(*fallback_axis, shape.size()) : whole);
      continue;
    }
    used[static_cast<size_t>(rule - rules_.data())] = true;
    ACC_CHECK(rule->output_index < 0, "sharding rules ", source_, ", key '", rule->key, "' matches parameter '",
              name, "': [i] selects an element of a module's output and does not apply to a parameter");
    ACC_CHECK(rule->spec.rank() == shape.size(), "sharding rules ", source_, ", key '", rule->key, "': spec ",
              rule->spec.to_string(), " has ", rule->spec.rank(), " entries but parameter '", name, "' has shape ",
              "[", util::join(shape), "]", " (", shape.size(), " dimensions)");
    out.parameters.emplace_back(name, rule->spec);
  }
  for (const auto& path : modules) {
    if (path.empty()) continue;  // the model itself
    std::vector<int> indices;  // of the output, each decided by its first key
    for (size_t i = 0; i < rules_.size(); ++i) {
      const ShardingRule& rule = rules_[i];
      if (!name_matches(rule.pattern, path) ||
          std::find(indices.begin(), indices.end(), rule.output_index) != indices.end())
        continue;
      indices.push_back(rule.output_index);
      used[i] = true;
      out.outputs.emplace_back(path, rule);
    }
  }
  // A file none of whose keys names anything here was written for another model: a warning
  // per key would bury that, and the run would shard nothing the file meant to.
  ACC_CHECK(rules_.empty() || std::ranges::any_of(used, [](bool u) { return u; }), "sharding rules ", source_,
            ": none of its ", rules_.size(), " keys matches a parameter or module of the model (its parameters "
            "are named like '", parameters.empty() ? std::string() : parameters.front().first,
            "'): the file is written for another model");
  for (size_t i = 0; i < rules_.size(); ++i)
    if (!used[i])
      out.warnings.push_back("sharding rules " + source_ + ": key '" + rules_[i].key +
                             "' matches no parameter and no module of the model (ignored)");
  return out;
}

}  // namespace acc::spmd
