#pragma once
// accelerate test [--num_processes N] [--config_file F] [--<config key> VALUE ...]: launches
// acc_selftest (installed next to accelerate) on 2 ranks (or N) with the config launch would
// use — a few steps of a small GPT-2 compared with one process — and reports PASS or what
// differs.
#include <string>
#include <vector>

namespace acc::cli {

int run_test(const std::vector<std::string>& args);

}  // namespace acc::cli
