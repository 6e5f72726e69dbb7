#pragma once
// A sharding rules file, in torchprime's format: a YAML map from names to partition specs.
//
//   model.embed_tokens.weight: [fsdp, null]              a parameter, by its qualified name
//   model.layers.*.self_attn.q_proj.weight: [fsdp, model]  '*' matches any integer
//   model.layers.*: [fsdp, null, null]                   a module: its output's sharding
//   model.layers.*[0]: [fsdp, null, null]                [i]: element i of a tuple output
//
// A key naming a parameter shards that parameter; a key naming a module shards its output
// (activation sharding). The first key in the file that matches a name decides for it.
#include <optional>
#include <string>
#include <vector>

#include "acc/spmd/partition_spec.h"
#include "acc/tensor/tensor.h"

namespace acc::spmd {

struct ShardingRule {
  std::string key;          // as written
  std::string pattern;      // the key without its [i] suffix
  int output_index = -1;    // the i of [i]; -1: the output itself
  PartitionSpec spec;
};

// True when `name` is `pattern` with each '*' replaced by a non-empty run of digits.
bool name_matches(const std::string& pattern, const std::string& name);

// What a model's names resolve to under the rules.
struct ResolvedSharding {
  std::vector<std::pair<std::string, PartitionSpec>> parameters;  // every parameter, in order
  // Module path -> a rule for its output (or one element of it: several with distinct [i]).
  std::vector<std::pair<std::string, ShardingRule>> outputs;
  std::vector<std::string> warnings;  // keys that match no parameter and no module
};

class ShardingRules {
 public:
  static ShardingRules from_file(const std::string& path);
  // `source` names the text in errors (a path, "<inline>").
  static ShardingRules parse(const std::string& yaml, const std::string& source);

  const std::vector<ShardingRule>& rules() const { return rules_; }
  const std::string& source() const { return source_; }
  // The first rule whose pattern matches `name` (parameter keys never carry [i]).
  const ShardingRule* find(const std::string& name) const;
  // Every spec's axis `from` renamed `to`, for a second name of one axis (torchprime's `tensor`
  // for `model`). An error names the key whose spec would then split two dims over `to`.
  void rename_axis(const std::string& from, const std::string& to);

  // Resolves a model's parameters (qualified name and shape) and module paths against the
  // rules on a mesh with axes `axis_names`. A parameter no key names gets `fallback` for its
  // rank when given (the default sharding), else stays whole. Errors (naming the file, key and
  // name): a spec whose length differs from the parameter's rank, an axis the mesh lacks, [i]
  // on a parameter key.
  ResolvedSharding resolve(const std::vector<std::pair<std::string, Shape>>& parameters,
                           const std::vector<std::string>& modules,
                           const std::vector<std::string>& axis_names,
                           const std::optional<std::string>& fallback_axis = std::nullopt) const;

 private:
  std::string source_;
  std::vector<ShardingRule> rules_;
};

}  // namespace acc::spmd
