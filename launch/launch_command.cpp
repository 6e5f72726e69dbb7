#include "launch_command.h"

#include <Poco/Exception.h>
#include <Poco/Pipe.h>
#include <Poco/PipeStream.h>
#include <Poco/Process.h>
#include <unistd.h>

#include <signal.h>
#include <sys/types.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <ranges>
#include <sstream>
#include <optional>
#include <iostream>
#include <thread>

#include "acc/accelerate/accelerate.h"
#include "acc/runtime/preemption.h"
#include "acc/util/error.h"
#include "acc/util/log.h"
#include "acc/util/strings.h"
#include "commands.h"
#include "mpirun_messages.h"
#include "rank_output.h"

namespace acc::cli {
namespace {

const char* kUsage =
    "usage: accelerate launch [--num_processes N] [--config_file F] [--<config key> VALUE ...]\n"
    "                         [--hostfile F | --hosts H1,H2] [--max_restarts K] [--dry_run]\n"
    "                         program [args...]\n"
    "  --num_processes N  ranks to start on this machine (default: the config's num_processes)\n"
    "  --config_file F    accelerate config (YAML); default: the one `accelerate config` wrote\n"
    "  --<key> VALUE      any config key on top of the file, e.g. --mixed_precision bf16,\n"
    "                     --fsdp_sharding_strategy SHARD_GRAD_OP, --fsdp_state_dict_type FULL_STATE_DICT\n"
    "  --num_machines M   machines; with --hostfile F (OpenMPI's format: 'host slots=N' per line)\n"
    "                     or --hosts H1,H2: one mpirun here starts every rank, rank 0 on the first\n"
    "  --max_restarts K   start a failed job again up to K times (programs resume from checkpoints)\n"
    "  --preempt_grace_s S  on SIGTERM or SIGUSR1, the ranks save and stop; after S seconds (30),\n"
    "                     or at a second SIGTERM, they are stopped at once\n"
    "  --dry_run          print the mpirun command and the config instead of running\n";

// A config key named on the command line: its short name ("fsdp_sharding_strategy").
bool is_config_key(const std::string& name) {
  for (const auto& key : Config::keys()) {
    const auto dot = key.find('.');
    if (name == key || (dot != std::string::npos && name == key.substr(dot + 1))) return true;
  }
  return false;
}

// How long a machine's ssh port may take to answer before the launch gives up on it.
constexpr int kHostTimeoutSeconds = 10;

// mpirun's pid while it runs, for the signal handlers.
std::atomic<pid_t> g_mpirun{0};
std::atomic<bool> g_interrupted{false};
std::atomic<int> g_signal{0};  // the signal that interrupted the launch
std::atomic<bool> g_preempting{false};  // a preemption notice was passed to the ranks
std::atomic<int> g_grace_s{30};

// Stops every rank at once: mpirun passes the signal on and ends the job.
void stop_now(int sig) {
  g_interrupted = true;
  g_signal = sig;
  if (const pid_t pid = g_mpirun.load(); pid > 0) ::kill(pid, sig);
}

extern "C" void on_interrupt(int sig) { stop_now(sig); }

// SIGTERM or SIGUSR1, a scheduler's notice: the first asks the ranks to save and stop (mpirun
// passes SIGUSR1 on to every rank, runtime/preemption.h), with SIGALRM set to end the grace
// period; a second SIGTERM, or the alarm, stops them at once.
extern "C" void on_notice(int sig) {
  const pid_t pid = g_mpirun.load();
  if (sig != SIGALRM && pid > 0 && !g_interrupted && !g_preempting.exchange(true)) {
    static const char kSaying[] =
        "accelerate launch: preemption notice: the ranks save and stop (a second SIGTERM stops them at once)\n";
    [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, kSaying, sizeof kSaying - 1);
    ::kill(pid, SIGUSR1);
    ::alarm(static_cast<unsigned>(g_grace_s.load()));
    return;
  }
  if (sig == SIGUSR1 && g_preempting) return;  // a repeated early notice changes nothing
  stop_now(SIGTERM);
}

// True when `program` is an executable file (a path) or a command on PATH, as a shell finds it.
bool is_executable_here(const std::string& program) {
  auto runnable = [](const std::filesystem::path& p) {
    return std::filesystem::is_regular_file(p) && ::access(p.c_str(), X_OK) == 0;
  };
  if (program.find('/') != std::string::npos) return runnable(program);
  const char* path = std::getenv("PATH");
  std::stringstream folders(path ? path : "");
  for (std::string folder; std::getline(folders, folder, ':');)
    if (runnable(std::filesystem::path(folder.empty() ? "." : folder) / program)) return true;
  return false;
}

// One run of mpirun: its output rewritten per rank; returns its exit code. A rank's line
// "preempted at step ..." is kept in `preempted_line`.
int run_mpirun(const std::vector<std::string>& mpi_args, const Poco::Process::Env& env,
               std::string& preempted_line) {
  Poco::Pipe output;  // ranks' stdout and stderr, tagged by mpirun, in one stream
  Poco::ProcessHandle mpirun = [&] {
    try {
      return Poco::Process::launch("mpirun", mpi_args, nullptr, &output, &output, env);
    } catch (const Poco::Exception& e) {
      ACC_FAIL("could not start mpirun (is OpenMPI installed and on PATH?): ", e.displayText());
    }
  }();
  g_mpirun = mpirun.id();
  if (g_interrupted) ::kill(mpirun.id(), SIGTERM);  // a signal that came before the pid was known
  Poco::PipeInputStream stream(output);
  output.close(Poco::Pipe::CLOSE_WRITE);  // so the stream ends when mpirun exits
  MpirunMessages messages(log::logger().should_log(spdlog::level::debug));
  RepeatedErrors repeated;
  for (std::string line; std::getline(stream, line);) {
    // Flushed per line: a log file being followed (tail -f) shows each line as it comes.
    if (const auto tagged = parse_tagged_line(line)) {
      if (repeated.held_back(*tagged)) continue;
      (tagged->is_stderr ? std::cerr : std::cout) << rank_prefixed(*tagged) << std::endl;
      if (tagged->text.starts_with("preempted at step")) preempted_line = tagged->text;
    } else
      for (const auto& kept : messages.take(line)) std::cerr << kept << '\n';  // mpirun's own
  }
  for (const auto& same : repeated.finish()) std::cerr << same << '\n';
  for (const auto& kept : messages.finish()) std::cerr << kept << '\n';
  const int code = mpirun.wait();
  g_mpirun = 0;
  return code;
}

// The resolved config in a file of its own for the ranks, removed when the launch ends.
class TempConfigFile {
 public:
  explicit TempConfigFile(const std::string& yaml) {
    std::string pattern = (std::filesystem::temp_directory_path() / "acc_launch_XXXXXX.yaml").string();
    const int fd = ::mkstemps(pattern.data(), 5);
    ACC_CHECK(fd >= 0, "cannot create a temporary config file in ", std::filesystem::temp_directory_path().string());
    const bool ok = ::write(fd, yaml.data(), yaml.size()) == static_cast<ssize_t>(yaml.size());
    ::close(fd);
    path_ = pattern;
    ACC_CHECK(ok, "cannot write the temporary config file ", path_);
  }
  ~TempConfigFile() { std::filesystem::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The machines: checked against num_machines, the main machine and the rank count.
void resolve_hosts(const LaunchOptions& o, ResolvedLaunch& r) {
  const int machines = r.config.dist.num_machines;
  ACC_CHECK(o.hostfile.empty() || o.host_list.empty(), "--hostfile and --hosts both name the machines; give one");
  const int machine_rank = o.machine_rank != 0 ? o.machine_rank : r.config.dist.machine_rank;
  ACC_CHECK(machine_rank == 0, "machine_rank ", machine_rank,
            ": acc starts the ranks of every machine from the main machine (machine_rank 0) with one "
            "mpirun; run accelerate launch there only");
  if (!o.hostfile.empty()) r.hosts = read_hostfile(o.hostfile);
  if (!o.host_list.empty()) r.hosts = parse_host_list(o.host_list);
  if (machines == 1 && r.hosts.empty()) return;
  ACC_CHECK(!r.hosts.empty(), "num_machines is ", machines,
            ": name the machines with --hostfile FILE (OpenMPI's format, 'host slots=N' per line) or "
            "--hosts H1,H2");
  ACC_CHECK(static_cast<int>(r.hosts.size()) == machines, "num_machines is ", machines, " but ",
            o.hostfile.empty() ? "--hosts" : "the hostfile", " names ", r.hosts.size(), " machine",
            r.hosts.size() == 1 ? "" : "s", "; give num_machines (--num_machines) to match");
  ACC_CHECK(r.num_processes % machines == 0, "num_processes ", r.num_processes, " is not a multiple of num_machines ",
            machines, " (every machine runs the same number of ranks)");
  ACC_CHECK(o.main_process_ip.empty() || o.main_process_ip == r.hosts.front().name, "--main_process_ip ",
            o.main_process_ip, ": rank 0 runs on the first machine listed (", r.hosts.front().name,
            "); list ", o.main_process_ip, " first");
  for (Host& h : r.hosts) {
    if (h.slots == 0) h.slots = r.num_processes / machines;
    ACC_CHECK(h.slots == r.num_processes / machines, "host '", h.name, "' has ", h.slots, " slots but each machine runs ",
              r.num_processes / machines, " ranks (num_processes / num_machines)");
  }
}

// Every ACC_* variable of this environment, so that ranks on other machines see them too.
std::vector<std::string> acc_environment_names() {
  std::vector<std::string> names;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    if (entry.rfind("ACC_", 0) == 0) names.push_back(entry.substr(0, entry.find('=')));
  }
  return names;
}

}  // namespace

LaunchOptions parse_launch_args(const std::vector<std::string>& args) {
  LaunchOptions o;
  size_t i = 0;
  std::string took;  // the last option that took a file's name as its value, and that file
  // "--name value" or "--name=value"
  auto value_of = [&](const std::string& arg, const std::string& name) -> std::string {
    if (arg.size() > name.size() && arg[name.size()] == '=') return arg.substr(name.size() + 1);
    ACC_CHECK(i + 1 < args.size(), name, " needs a value\n", kUsage);
    if (std::filesystem::is_regular_file(args[i + 1])) took = name + " took the file '" + args[i + 1] + "' as its value";
    return args[++i];
  };
  for (; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.rfind("--", 0) != 0) break;  // the program starts here
    const std::string name = arg.substr(0, arg.find('='));
    if (name == "--num_processes") {
      o.num_processes = parse_count(value_of(arg, name), name, 1);
    } else if (name == "--max_restarts") {
      o.max_restarts = parse_count(value_of(arg, name), name, 0);
    } else if (name == "--preempt_grace_s") {
      o.preempt_grace_s = parse_count(value_of(arg, name), name, 1);
    } else if (name == "--config_file") {
      const std::string path = value_of(arg, name);
      ACC_CHECK(std::filesystem::is_regular_file(path), "--config_file '", path,
                "' is not a file");
      o.config_file = std::filesystem::absolute(path).string();
    } else if (name == "--hostfile") {
      const std::string path = value_of(arg, name);
      ACC_CHECK(std::filesystem::is_regular_file(path), "--hostfile '", path, "' is not a file");
      o.hostfile = std::filesystem::absolute(path).string();
    } else if (name == "--hosts") {
      o.host_list = value_of(arg, name);
    } else if (name == "--machine_rank") {
      o.machine_rank = parse_count(value_of(arg, name), name, 0);
    } else if (name == "--main_process_ip") {
      o.main_process_ip = value_of(arg, name);
    } else if (name == "--dry_run") {
      o.dry_run = true;
    } else if (name == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else if (is_config_key(name.substr(2))) {
      o.overrides.emplace_back(name.substr(2), value_of(arg, name));
    } else {
      ACC_FAIL("unknown option '", arg, "'; known: --num_processes, --config_file, --hostfile, --hosts, "
               "--machine_rank, --main_process_ip, --max_restarts, --dry_run and every config key "
               "(see docs/config.md)\n", kUsage);
    }
  }
  o.program.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  // The program may have gone as the value of an option that was given none.
  ACC_CHECK(!o.program.empty(), "no program to launch", took.empty() ? "" : " (" + took + ")", "\n", kUsage);
  return o;
}

std::string config_file_of(const LaunchOptions& o) {
  if (o.config_file.empty() && std::filesystem::is_regular_file(Config::default_path())) return Config::default_path();
  return o.config_file;
}

ResolvedLaunch resolve_launch(const LaunchOptions& o) {
  ResolvedLaunch r;
  const std::string file = config_file_of(o);
  r.config = file.empty() ? Config{} : Config::from_file(file);
  r.source = file.empty() ? "defaults" : file;
  for (const auto& [key, value] : o.overrides) {
    try {
      r.config.set(key, value);
    } catch (const Error& e) {
      ACC_FAIL("--", key, " ", value, ": ", e.what());
    }
    r.source += " + --" + key + " " + value;
  }
  // An FSDP key on the command line of a non-distributed config that names no strategy means
  // FSDP, as it reads.
  const auto named = [&o](const std::string& prefix) {
    return std::any_of(o.overrides.begin(), o.overrides.end(),
                       [&](const auto& kv) { return kv.first.rfind(prefix, 0) == 0; });
  };
  if (named("fsdp_") && !named("distributed_type") && r.config.dist.distributed_type == DistributedType::NO &&
      r.config.dist.strategy.empty()) {
    r.config.dist.distributed_type = DistributedType::FSDP;
    r.source += " (FSDP: an fsdp key was given)";
  }
  // A strategy's key given for a config that runs another strategy changes nothing: say so. The
  // key's section is the one Config::set put it in: named, or the first that has the key.
  const auto sections = all_option_sections();
  for (const auto& [key, value] : o.overrides) {
    const auto dot = key.find('.');
    const auto section = std::ranges::find_if(sections, [&](const auto& s) {
      return dot == std::string::npos ? s->find(key) != nullptr : key.substr(0, dot) == s->name;
    });
    if (section != sections.end() && !r.config.strategy_reads((*section)->name))
      log::warn("--{}: {}", key, r.config.unread_section_warning((*section)->name, key));
  }
  if (o.num_processes > 0) r.config.dist.num_processes = o.num_processes;
  r.num_processes = r.config.dist.num_processes;
  check_launchable(r.config);
  resolve_hosts(o, r);
  return r;
}

std::vector<std::string> mpirun_args(const LaunchOptions& o, const ResolvedLaunch& r, int cores,
                                     bool as_root) {
  std::vector<std::string> a = {"-np", std::to_string(r.num_processes), "--tag-output"};
  if (as_root) a.push_back("--allow-run-as-root");  // mpirun refuses root without it
  int per_machine = r.num_processes;
  if (!r.hosts.empty()) {
    std::string hosts;
    for (const Host& h : r.hosts) hosts += (hosts.empty() ? "" : ",") + h.name + ":" + std::to_string(h.slots);
    // Ranks per physical machine (a name listed twice, e.g. localhost in tests, is one machine).
    std::map<std::string, int> ranks_on;
    for (const Host& h : r.hosts) ranks_on[is_local_host(h.name) ? "" : h.name] += h.slots;
    per_machine = std::ranges::max(ranks_on | std::views::values);
    // ssh must fail rather than ask for a password or wait on a silent machine.
    a.insert(a.end(), {"--host", hosts, "--mca", "plm_rsh_args",
                       "-o BatchMode=yes -o ConnectTimeout=" + std::to_string(kHostTimeoutSeconds)});
  }
  if (per_machine > cores) {
    a.insert(a.end(), {"--oversubscribe", "--bind-to", "none"});
  } else {
    a.insert(a.end(), {"--map-by", "slot:PE=" + std::to_string(cores / per_machine),
                       "--bind-to", "core"});
  }
  a.insert(a.end(), {"-x", "ACC_CONFIG_FILE", "-x", "ACC_RESTART_COUNT"});
  for (const auto& name : acc_environment_names())
    if (name != "ACC_CONFIG_FILE" && name != "ACC_RESTART_COUNT") a.insert(a.end(), {"-x", name});
  a.insert(a.end(), o.program.begin(), o.program.end());
  return a;
}

int run_launch(const std::vector<std::string>& args) {
  const LaunchOptions o = parse_launch_args(args);
  const ResolvedLaunch r = resolve_launch(o);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const auto mpi_args = mpirun_args(o, r, cores, geteuid() == 0);
  std::cout << "accelerate launch: " << r.num_processes << " ranks";
  if (!r.hosts.empty()) std::cout << " on " << r.hosts.size() << " machines";
  std::cout << ", config from " << r.source << ":\n" << r.config.to_yaml() << std::flush;
  if (o.dry_run) {
    std::cout << "mpirun";
    for (const auto& a : mpi_args) std::cout << ' ' << a;
    std::cout << '\n';
    return 0;
  }
  if (!is_executable_here(o.program.front())) {
    std::cerr << "accelerate launch: error: program '" << o.program.front()
              << "' not found (not an executable file, nor a command on PATH)\n";
    return 127;  // the shell's "command not found"
  }
  for (const Host& h : r.hosts) check_reachable(h, kHostTimeoutSeconds);
  // The ranks read exactly what was printed: the file itself when nothing was overridden.
  std::optional<TempConfigFile> resolved;
  if (!o.overrides.empty() || o.num_processes > 0 || o.config_file.empty()) resolved.emplace(r.config.to_yaml());
  Poco::Process::Env env;
  env["ACC_CONFIG_FILE"] = resolved ? resolved->path() : o.config_file;
  g_grace_s = o.preempt_grace_s;
  ::signal(SIGINT, on_interrupt);
  ::signal(SIGTERM, on_notice);
  ::signal(SIGUSR1, on_notice);
  ::signal(SIGALRM, on_notice);
  int code = 0;
  std::string preempted_line;
  for (int attempt = 0; attempt <= o.max_restarts; ++attempt) {
    env["ACC_RESTART_COUNT"] = std::to_string(attempt);
    code = run_mpirun(mpi_args, env, preempted_line);
    if (code == 0 || g_interrupted || g_preempting) break;
    if (attempt < o.max_restarts)
      std::cerr << "accelerate launch: the job failed (exit code " << code << "); restart "
                << attempt + 1 << " of " << o.max_restarts << "\n";
  }
  if (g_preempting && !g_interrupted && code == kPreemptedExitCode && !preempted_line.empty()) {
    std::cerr << "accelerate launch: " << preempted_line << "\n";
    return kPreemptedExitCode;
  }
  if (g_interrupted || g_preempting) {
    std::cerr << "accelerate launch: " << (g_preempting && !g_interrupted ? "stopped after a preemption notice"
                                                                          : "interrupted")
              << "; every rank was stopped\n";
    return 128 + (g_interrupted ? g_signal.load() : SIGTERM);  // the shell's convention: 130, 143
  }
  return code;
}

}  // namespace acc::cli
