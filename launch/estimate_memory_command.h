#pragma once
#include <string>
#include <vector>

namespace acc::cli {

// accelerate estimate-memory MODEL --num_processes N [...]: per-rank memory of every strategy.
int run_estimate_memory(const std::vector<std::string>& args);

}  // namespace acc::cli
