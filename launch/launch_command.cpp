#include "launch_command.h"

#include <Poco/Exception.h>
#include <Poco/Pipe.h>
#include <Poco/PipeStream.h>
#include <Poco/Process.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include "acc/util/error.h"
#include "rank_output.h"

namespace acc::cli {
namespace {

const char* kUsage =
    "usage: accelerate launch --num_processes N [--config_file F] [--dry_run] program [args...]\n"
    "  --num_processes N  ranks to start on this machine (default 1)\n"
    "  --config_file F    accelerate config (YAML); ranks find it in ACC_CONFIG_FILE\n"
    "  --dry_run          print the mpirun command instead of running it\n";

int parse_count(const std::string& value) {
  size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  ACC_CHECK(used == value.size() && n >= 1, "--num_processes '", value,
            "' is not a rank count; expected a whole number >= 1");
  return n;
}

}  // namespace

LaunchOptions parse_launch_args(const std::vector<std::string>& args) {
  LaunchOptions o;
  size_t i = 0;
  // "--name value" or "--name=value"
  auto value_of = [&](const std::string& arg, const std::string& name) -> std::string {
    if (arg.size() > name.size() && arg[name.size()] == '=') return arg.substr(name.size() + 1);
    ACC_CHECK(i + 1 < args.size(), name, " needs a value\n", kUsage);
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
      o.num_processes = parse_count(value_of(arg, name));
    } else if (name == "--config_file") {
      const std::string path = value_of(arg, name);
      ACC_CHECK(std::filesystem::is_regular_file(path), "--config_file '", path,
                "' is not a file");
      o.config_file = std::filesystem::absolute(path).string();
    } else if (name == "--dry_run") {
      o.dry_run = true;
    } else if (name == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else {
      ACC_FAIL("unknown option '", arg, "'; known: --num_processes, --config_file, --dry_run\n",
               kUsage);
    }
  }
  o.program.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  ACC_CHECK(!o.program.empty(), "no program to launch\n", kUsage);
  return o;
}

std::vector<std::string> mpirun_args(const LaunchOptions& o, int cores, bool as_root) {
  std::vector<std::string> a = {"-np", std::to_string(o.num_processes), "--tag-output"};
  if (as_root) a.push_back("--allow-run-as-root");  // mpirun refuses root without it
  if (o.num_processes > cores) {
    a.insert(a.end(), {"--oversubscribe", "--bind-to", "none"});
  } else {
    a.insert(a.end(), {"--map-by", "slot:PE=" + std::to_string(cores / o.num_processes),
                       "--bind-to", "core"});
  }
  if (!o.config_file.empty()) a.insert(a.end(), {"-x", "ACC_CONFIG_FILE"});
  a.insert(a.end(), o.program.begin(), o.program.end());
  return a;
}

int run_launch(const std::vector<std::string>& args) {
  const LaunchOptions o = parse_launch_args(args);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const auto mpi_args = mpirun_args(o, cores, geteuid() == 0);
  if (o.dry_run) {
    std::cout << "mpirun";
    for (const auto& a : mpi_args) std::cout << ' ' << a;
    std::cout << '\n';
    return 0;
  }
  Poco::Process::Env env;
  if (!o.config_file.empty()) env["ACC_CONFIG_FILE"] = o.config_file;
  Poco::Pipe output;  // ranks' stdout and stderr, tagged by mpirun, in one stream
  Poco::ProcessHandle mpirun = [&] {
    try {
      return Poco::Process::launch("mpirun", mpi_args, nullptr, &output, &output, env);
    } catch (const Poco::Exception& e) {
      ACC_FAIL("could not start mpirun (is OpenMPI installed and on PATH?): ", e.displayText());
    }
  }();
  Poco::PipeInputStream stream(output);
  output.close(Poco::Pipe::CLOSE_WRITE);  // so the stream ends when mpirun exits
  for (std::string line; std::getline(stream, line);) {
    if (const auto tagged = parse_tagged_line(line))
      (tagged->is_stderr ? std::cerr : std::cout) << rank_prefixed(*tagged) << '\n';
    else
      std::cerr << line << '\n';  // mpirun's own messages
  }
  return mpirun.wait();
}

}  // namespace acc::cli
