#pragma once
// accelerate env: the block users paste into bug reports — acc version, CPU and ISA, cores,
// memory, MPI, oneDNN and its ISA, the plugins found, the config in use.
#include <string>
#include <vector>

namespace acc::cli {

int run_env(const std::vector<std::string>& args);

}  // namespace acc::cli
