#include "test_command.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include "acc/util/error.h"
#include "launch_command.h"

namespace acc::cli {

int run_test(const std::vector<std::string>& args) {
  if (std::find_if(args.begin(), args.end(), [](const std::string& a) { return a == "--help" || a == "-h"; }) !=
      args.end()) {
    std::cout << "usage: accelerate test [--num_processes N] [--config_file F] [--<config key> VALUE ...]\n"
                 "  a few steps of a small GPT-2 on 2 ranks (or N) with the config accelerate launch would\n"
                 "  use, compared with one process; prints PASS or what differs\n";
    return 0;
  }
  const auto self = std::filesystem::read_symlink("/proc/self/exe");
  const auto selftest = self.parent_path() / "acc_selftest";
  ACC_CHECK(std::filesystem::is_regular_file(selftest), "accelerate test: ", selftest.string(),
            " is missing (it is built and installed with accelerate)");
  std::vector<std::string> launch = args;
  const bool counted = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a.rfind("--num_processes", 0) == 0;
  });
  if (!counted) launch.insert(launch.begin(), {"--num_processes", "2"});
  launch.push_back(selftest.string());
  return run_launch(launch);
}

}  // namespace acc::cli
