#include "estimate_memory_command.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "acc/accelerate/auto_strategy.h"
#include "acc/estimate/memory_estimate.h"
#include "acc/train/lm_program.h"
#include "acc/util/error.h"
#include "acc/util/strings.h"
#include "commands.h"

namespace acc::cli {

namespace {

constexpr const char* kUsage = R"(usage: accelerate estimate-memory MODEL [options]

Per-rank memory of one training step (AdamW) for every strategy that gives an estimate (the
FSDP settings, and plugins' strategies on ACC_PLUGIN_PATH), by the categories acc's
allocator counts: parameters (f32 masters, bf16 copies), gradients, optimizer state, gathered
units, activations and communication buffers. MODEL is a preset (gpt2-tiny, gpt2, gpt2-medium,
gpt2-large, gpt2-xl, llama-tiny, llama-small), a model config YAML or a .safetensors file.
Each strategy's rows use the options of --config_file (default: none set), as the training
programs run them: without a wrap policy, each transformer block is its own FSDP unit. AUTO
picks the first row in the order printed that fits (the least communication first).

  --config_file F             the options the strategies are estimated with (wrap policy,
                              a plugin's section, ...); its num_processes, mixed_precision
                              and fsdp_memory_limit are the defaults of the options below
  --num_processes N           ranks (default 1)
  --ranks_per_node R          ranks on one machine (default N); the hybrids shard within one
  --mixed_precision no|bf16   compute dtype (default no)
  --batch B                   global batch in samples (default 8); each rank gets B / N
  --seq T                     tokens per sample (default 1024)
  --activation_checkpointing  each transformer block keeps only its input
  --offload                   fsdp_offload_params: masters, gradients and optimizer state in
                              the offload tier; the table splits each total into the compute
                              tier (gathered, activations, communication) and the offload tier
  --offload_dir DIR           where AUTO may offload (fsdp_offload_dir under AUTO): the rows
                              keep everything in memory, and a last one, FULL_SHARD with
                              checkpointing and the masters, gradients and optimizer state
                              in files in DIR (the "on disk" column), is tried if DIR has the
                              space; its "cache" is the freed blocks the allocator then keeps
                              for reuse (256 MiB, or ACC_ALLOC_CACHE_MB)
  --save_async                checkpoint::save_async (--save_async of the training programs):
                              a column for the host copy of the state each rank writes from
  --memory_limit SIZE         what AUTO may use per rank, e.g. 8GiB (default: the config's
                              fsdp_memory_limit, else the rank's share of this machine's memory)
)";

struct Options {
  std::string model;
  Config config;
  estimate::Workload workload{.world = 1, .ranks_per_node = 0, .batch = 8, .seq = 1024};
  bool checkpointing = false;
  bool offload = false;
  std::string offload_dir;
  int64_t memory_limit = 0;
};

Options parse(const std::vector<std::string>& args) {
  Options o;
  bool world_given = false, precision_given = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> const std::string& {
      ACC_CHECK(i + 1 < args.size(), a, " needs a value\n", kUsage);
      return args[++i];
    };
    if (a == "--config_file") {
      o.config = Config::from_file(value());
      if (!world_given) o.workload.world = o.config.dist.num_processes;
      if (!precision_given) o.workload.bf16 = o.config.compute.bf16;
    } else if (a == "--num_processes") {
      o.workload.world = parse_count(value(), a, 1);
      world_given = true;
    } else if (a == "--ranks_per_node") {
      o.workload.ranks_per_node = parse_count(value(), a, 1);
    } else if (a == "--batch") {
      o.workload.batch = parse_count(value(), a, 1);
    } else if (a == "--seq") {
      o.workload.seq = parse_count(value(), a, 1);
    } else if (a == "--mixed_precision") {
      const std::string& v = value();
      ACC_CHECK(v == "no" || v == "bf16", a, ": expected no or bf16, got '", v, "'");
      o.workload.bf16 = v == "bf16";
      precision_given = true;
    } else if (a == "--activation_checkpointing") {
      o.checkpointing = true;
    } else if (a == "--memory_limit") {
      const std::string& v = value();
      const auto bytes = util::parse_bytes(v);
      ACC_CHECK(bytes, a, ": expected a size such as 8GiB or 512MB, got '", v, "'");
      o.memory_limit = *bytes;
    } else if (a == "--offload") {
      o.offload = true;
    } else if (a == "--offload_dir") {
      o.offload_dir = value();
    } else if (a == "--save_async") {
      o.workload.save_async = true;
    } else {
      ACC_CHECK(a.rfind("--", 0) != 0, "unknown option '", a, "'\n", kUsage);
      ACC_CHECK(o.model.empty(), "one MODEL expected, got '", o.model, "' and '", a, "'\n", kUsage);
      o.model = a;
    }
  }
  ACC_CHECK(!o.model.empty(), "MODEL is missing\n", kUsage);
  if (o.workload.ranks_per_node == 0) o.workload.ranks_per_node = o.workload.world;
  ACC_CHECK(o.workload.batch % o.workload.world == 0, "--batch ", o.workload.batch,
            " must be a multiple of --num_processes ", o.workload.world, " (each rank gets an equal part)");
  return o;
}

// The options the rows are estimated with: --config_file's as the training programs run them,
// the other strategies' rows as the programs would run those had the file named them (FSDP's
// wrap the blocks under a PIPELINE config), plus what the flags ask.
Config estimated_config(const Options& o) {
  Config config = train::with_program_defaults(o.config);
  for (const auto& section : all_option_sections())
    if (section->program_defaults && !o.config.strategy_reads(section->name)) section->program_defaults(config);
  if (o.checkpointing) config.set("fsdp_config.fsdp_activation_checkpointing", "true");
  if (!o.offload_dir.empty()) {
    config.dist.fsdp.offload_dir = o.offload_dir;  // as given: not read as YAML
    config.dist.strategy = kAutoStrategy;
  }
  return config;
}

// One line of the table: `name` padded to `width`, then the cells right-aligned.
std::string row(const std::string& name, size_t width, const std::vector<std::string>& cells) {
  std::string out = name;
  out.resize(std::max(width, name.size()), ' ');
  for (const auto& c : cells) {
    char cell[16];
    std::snprintf(cell, sizeof cell, "%12s", c.c_str());
    out += cell;
  }
  return out + "\n";
}

}  // namespace

int run_estimate_memory(const std::vector<std::string>& args) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    }
  const Options o = parse(args);
  const auto shape = estimate::ModelShape::from_name(o.model);
  const estimate::Workload& w = o.workload;
  std::cout << o.model << ": " << shape.parameters << " parameters";
  if (shape.family != estimate::Family::other)
    std::cout << " (" << estimate::to_string(shape.family) << ", " << shape.layers << " blocks of "
              << shape.block_parameters << ")";
  std::cout << "\n" << w.world << " rank" << (w.world > 1 ? "s" : "") << " (" << w.ranks_per_node
            << " per node), global batch " << w.batch << " x " << w.seq << " tokens, "
            << (w.bf16 ? "bf16" : "f32") << " compute, AdamW; bytes per rank\n\n";
  const Config config = estimated_config(o);
  const auto rows = strategy_estimates(shape, w, config);
  const bool disk = std::ranges::any_of(rows, [](const StrategyEstimate& r) { return r.memory.on_disk > 0; });
  std::vector<std::string> header{"parameters", "gradients", "optimizer", "gathered", "activations", "comm"};
  if (w.save_async) header.push_back("checkpoint");
  if (disk) header.push_back("cache");
  header.push_back(disk ? "in memory" : "total");
  if (o.offload) header.insert(header.end(), {"compute", "offload"});
  if (disk) header.push_back("on disk");
  size_t width = 46;
  for (const auto& r : rows) width = std::max(width, r.plan.size() + 2);
  std::cout << row("strategy", width, header);
  auto print = [&](const std::string& name, const estimate::Memory& e) {
    std::vector<std::string> cells{
        estimate::format_bytes(e.parameters),  estimate::format_bytes(e.gradients),
        estimate::format_bytes(e.optimizer_state), estimate::format_bytes(e.gathered),
        estimate::format_bytes(e.activations), estimate::format_bytes(e.communication)};
    if (w.save_async) cells.push_back(estimate::format_bytes(e.checkpoint));
    if (disk) cells.push_back(estimate::format_bytes(e.allocator_cache));
    cells.push_back(estimate::format_bytes(e.total()));
    if (o.offload) {
      const int64_t offloaded = e.parameters + e.gradients + e.optimizer_state;
      cells.push_back(estimate::format_bytes(e.total() - offloaded));
      cells.push_back(estimate::format_bytes(offloaded));
    }
    if (disk) cells.push_back(estimate::format_bytes(e.on_disk));
    std::cout << row(name, width, cells);
  };
  for (const auto& e : rows) {
    if (e.refused.empty())
      print(e.plan, e.memory);
    else  // the strategy would stop on this config: why, instead of numbers
      std::cout << row(e.plan, width, {}) << "  refused: " << e.refused << "\n";
  }
  const int64_t limit = o.memory_limit > 0 ? o.memory_limit : auto_memory_limit(config, w.ranks_per_node);
  const auto choice = choose_auto(rows, limit);
  std::cout << "\nAUTO (limit " << estimate::format_bytes(limit) << " per rank): "
            << (choice.fits ? "" : "nothing fits; the least memory is ") << choice.row.plan << "\n  "
            << choice.reason << "\n";
  if (shape.family == estimate::Family::other)
    std::cout << "(activations are not modelled for this model: only GPT-2 and Llama)\n";
  return 0;
}

}  // namespace acc::cli
