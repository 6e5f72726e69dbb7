#pragma once
// accelerate plot RUN_DIR: draws RUN_DIR/metrics.csv (written by the training programs) into
// RUN_DIR/loss.png (train and validation loss) and RUN_DIR/throughput.png (tokens/s, MFU)
// with gnuplot.
#include <string>
#include <vector>

namespace acc::cli {

// The gnuplot script for a run directory (exposed for tests).
std::string plot_script(const std::string& run_dir);
int run_plot(const std::vector<std::string>& args);

}  // namespace acc::cli
