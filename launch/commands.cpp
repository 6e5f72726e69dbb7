#include "commands.h"

#include "acc/util/error.h"
#include "acc/util/strings.h"

#include "config_command.h"
#include "env_command.h"
#include "estimate_memory_command.h"
#include "launch_command.h"
#include "merge_weights_command.h"
#include "plot_command.h"
#include "test_command.h"

namespace acc::cli {

int parse_count(const std::string& value, const std::string& name, int min) {
  const auto n = util::parse_int(value);
  ACC_CHECK(n && *n >= min, name, " '", value, "' is not a count; expected a whole number >= ", min);
  return *n;
}

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {
      {"config", "write, show, validate or update an accelerate config", run_config},
      {"env", "describe this machine, acc and its plugins (for bug reports)", run_env},
      {"estimate-memory", "per-rank memory of every strategy for a model, batch and rank count",
       run_estimate_memory},
      {"launch", "run a program on N ranks through mpirun", run_launch},
      {"merge-weights", "consolidate a checkpoint into one Hugging Face .safetensors file",
       run_merge_weights},
      {"test", "a few sharded steps with the current config, compared with one process", run_test},
      {"plot", "draw a training run's metrics.csv (loss, throughput) to PNG", run_plot},
  };
  return all;
}

}  // namespace acc::cli
