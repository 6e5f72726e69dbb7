#include "commands.h"

#include "launch_command.h"

namespace acc::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {
      {"launch", "run a program on N ranks through mpirun", run_launch},
  };
  return all;
}

}  // namespace acc::cli
