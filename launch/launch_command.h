#pragma once
// accelerate launch --num_processes N [--config_file F] [--dry_run] program [args...]
// Spawns N ranks of `program` through OpenMPI's mpirun on this machine, passes the config path
// to every rank as ACC_CONFIG_FILE, prints each rank's output lines as "[rank i] ...", and
// returns mpirun's status: the first non-zero exit code of any rank (0 when all succeed).
// Placement: more ranks than cores oversubscribes without binding; otherwise each rank is
// bound to its own cores/N cores, the threads acc::init gives it.
#include <string>
#include <vector>

namespace acc::cli {

struct LaunchOptions {
  int num_processes = 1;
  std::string config_file;  // absolute path, or empty
  bool dry_run = false;     // print the mpirun command instead of running it
  std::vector<std::string> program;  // program and its arguments
};

LaunchOptions parse_launch_args(const std::vector<std::string>& args);
// The arguments after "mpirun" for these options on a machine with `cores` cores.
std::vector<std::string> mpirun_args(const LaunchOptions& options, int cores, bool as_root);
int run_launch(const std::vector<std::string>& args);

}  // namespace acc::cli
