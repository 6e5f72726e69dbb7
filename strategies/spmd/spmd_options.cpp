#include "spmd_options.h"

#include <set>

#include "acc/util/error.h"
#include "common/config_fields.h"
#include "fsdp/fsdp_options.h"

namespace acc::spmd {

namespace {

bool empty(const SpmdConfig& s) { return s.mesh_shape.empty() && s.axis_names.empty() && s.sharding_rules.empty(); }

// A key of SpmdConfig. The section is written whole when any of its keys is set, else not at all.
template <class T>
OptionSpec key(OptionSpec spec, T SpmdConfig::*member) {
  spec = parallel::bind(std::move(spec), &DistConfig::spmd, member);
  spec.load = [load = spec.load](const Config& c) { return empty(c.dist.spmd) ? std::nullopt : load(c); };
  return spec;
}

void check(const Config& c) {
  if (c.dist.distributed_type != DistributedType::SPMD) return;
  const SpmdConfig& s = c.dist.spmd;
  ACC_CHECK(!s.mesh_shape.empty(),
            "spmd_config.mesh_shape: distributed_type SPMD needs a mesh shape (e.g. [2, 2])");
  for (int n : s.mesh_shape) ACC_CHECK(n > 0, "spmd_config.mesh_shape: entries must be > 0 (got ", n, ")");
  ACC_CHECK(s.axis_names.size() == s.mesh_shape.size(),
            "spmd_config.axis_names: needs one name per mesh_shape entry (got ", s.axis_names.size(),
            " names for ", s.mesh_shape.size(), " mesh axes)");
  std::set<std::string> seen;
  for (const auto& name : s.axis_names)
    ACC_CHECK(seen.insert(name).second, "spmd_config.axis_names: '", name,
              "' appears twice (names must be unique)");
}

}  // namespace

OptionSection option_section() {
  using T = OptionType;
  return {
      .name = "spmd_config",
      .distributed_type = "SPMD",
      .options =
          {
              key({.key = "axis_names", .type = T::text_list, .default_value = "[]",
                   .help = "one name per mesh axis: fsdp, model (or tensor), ...",
                   .question = "Mesh axis names?",
                   .suggest = parallel::offer("[fsdp, model]")},
                  &SpmdConfig::axis_names),
              key({.key = "mesh_shape", .type = T::integer_list, .default_value = "[]",
                   .help = "ranks along each mesh axis; their product is the number of processes",
                   .question = "Mesh shape, e.g. [2, 1]?",
                   .suggest =
                       [](const Config& c) {
                         std::string mesh = "[";
                         mesh += std::to_string(c.dist.num_processes);
                         return mesh += ", 1]";
                       }},
                  &SpmdConfig::mesh_shape),
              key({.key = "sharding_rules", .type = T::text,
                   .help = "a rules file giving each parameter's partition spec (empty: every parameter on fsdp)",
                   .question = "Sharding rules file (empty line: the default, every parameter on fsdp)?",
                   .suggest = parallel::offer("\"\"")},
                  &SpmdConfig::sharding_rules),
          },
      .also_reads = {"fsdp_config"},  // its units, checkpointing and offload are FSDP's
      .check_config = check,
      .strategy_of = [](const Config& c) -> std::optional<std::string> {
        if (c.dist.distributed_type == DistributedType::SPMD) return "SPMD";
        return std::nullopt;
      },
      .full_checkpoints = fsdp::full_checkpoints,
      .deferred_init = fsdp::deferred_init,
  };
}

}  // namespace acc::spmd
