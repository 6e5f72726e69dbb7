#pragma once
// accelerate launch [--num_processes N] [--config_file F] [--<config key> VALUE ...]
//                  [--max_restarts K] [--dry_run] program [args...]
// Spawns N ranks of `program` through OpenMPI's mpirun on this machine. The config is the file
// (else the default config `accelerate config` wrote, when there is one) with the command
// line's keys on top; it is checked here, printed once, and reaches every rank as
// ACC_CONFIG_FILE. N defaults to the config's num_processes. Each rank's output lines are
// printed as "[rank i] ...". Returns mpirun's status: the first non-zero exit code of any rank
// (0 when all succeed). SIGINT stops every rank (130). SIGTERM or SIGUSR1 is a preemption
// notice passed to the ranks as SIGUSR1 (runtime/preemption.h): a run that saved and stopped
// returns 75; a second SIGTERM or --preempt_grace_s stops them at once (143). With
// --max_restarts K a failed job is started again, up to K times, with ACC_RESTART_COUNT set
// (the training programs then resume from their latest checkpoint).
// Placement: more ranks per machine than cores oversubscribes without binding; otherwise each
// rank is bound to its own share of the cores, the threads acc::init gives it.
// Several machines (num_machines > 1): one mpirun on the main machine starts every rank, as
// DeepSpeed's OpenMPI runner does; the machines come from --hostfile (OpenMPI's format) or
// --hosts, rank 0 runs on the first, and each is checked to be reachable before mpirun starts.
#include <string>
#include <utility>
#include <vector>

#include "acc/config/config.h"
#include "hosts.h"

namespace acc::cli {

struct LaunchOptions {
  int num_processes = 0;    // 0: the config's num_processes
  std::string config_file;  // absolute path, or empty
  std::vector<std::pair<std::string, std::string>> overrides;  // config key, value
  int max_restarts = 0;
  int preempt_grace_s = 30;  // after a preemption notice, SIGTERM to the ranks once this passes
  bool dry_run = false;     // print the mpirun command instead of running it
  std::string hostfile;     // --hostfile, absolute
  std::string host_list;    // --hosts h1,h2
  int machine_rank = 0;     // accelerate's --machine_rank: only machine 0 launches
  std::string main_process_ip;
  std::vector<std::string> program;  // program and its arguments
};

LaunchOptions parse_launch_args(const std::vector<std::string>& args);

// The config file a launch with these options reads: --config_file, else the default config
// file when it exists; empty when neither (the defaults).
std::string config_file_of(const LaunchOptions& options);

// What the ranks get: the config (file, else the default config file, else the defaults, then
// the overrides; validated), where it came from, and the rank count.
struct ResolvedLaunch {
  Config config;
  std::string source;  // "configs/x.yaml + --mixed_precision bf16", "defaults", ...
  int num_processes = 1;
  std::vector<Host> hosts;  // empty: this machine only
};
ResolvedLaunch resolve_launch(const LaunchOptions& options);

// The arguments after "mpirun" for these options on a machine with `cores` cores.
std::vector<std::string> mpirun_args(const LaunchOptions& options, const ResolvedLaunch& resolved,
                                     int cores, bool as_root);
int run_launch(const std::vector<std::string>& args);

}  // namespace acc::cli
