#include "commands.h"

#include "launch_command.h"
#include "merge_weights_command.h"

namespace acc::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {
      {"launch", "run a program on N ranks through mpirun", run_launch},
      {"merge-weights", "consolidate a checkpoint into one Hugging Face .safetensors file",
       run_merge_weights},
  };
  return all;
}

}  // namespace acc::cli
