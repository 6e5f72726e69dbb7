#include "test_command.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "acc/config/config.h"
#include "acc/util/error.h"
#include "launch_command.h"

namespace acc::cli {

int run_test(const std::vector<std::string>& args) {
  if (std::find_if(args.begin(), args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; }) !=
      args.end()) {
    std::cout << "usage: accelerate test [--num_processes N] [--config_file F] [--<config key> VALUE ...]\n"
                 "  a few steps of a small GPT-2 on N ranks (else the config's num_processes, at least 2)\n"
                 "  with the config accelerate launch would use, compared with one process; prints PASS or\n"
                 "  what differs\n";
    return 0;
  }
  const auto self = std::filesystem::read_symlink("/proc/self/exe");
  const auto selftest = self.parent_path() / "acc_selftest";
  ACC_CHECK(std::filesystem::is_regular_file(selftest), "accelerate test: ", selftest.string(),
            " is missing (it is built and installed with accelerate)");
  std::vector<std::string> launch = args;
  launch.push_back(selftest.string());
  const bool counted = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a.rfind("--num_processes", 0) == 0;
  });
  // Without --num_processes: the config's own count when it names more than one (a mesh or a
  // pipeline may need exactly that many), else 2.
  if (!counted) {
    const std::string file = config_file_of(parse_launch_args(launch));
    const int configured = file.empty() ? 1 : Config::parse_file(file).dist.num_processes;
    launch.insert(launch.begin(), {"--num_processes", std::to_string(configured > 1 ? configured : 2)});
  }
  return run_launch(launch);
}

}  // namespace acc::cli
