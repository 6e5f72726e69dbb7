#pragma once
// metrics.csv of a training run: one row per optimizer step (step, loss, val_loss, lr,
// grad_norm, tokens_per_s, mfu, peak_mb), flushed as it goes so a crashed run keeps its
// curve. `accelerate plot RUN_DIR` draws it.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>

namespace acc::train {

struct MetricsRow {
  int64_t step = 0;
  double loss = 0;
  std::optional<double> val_loss{};  // only on validation steps
  double lr = 0, grad_norm = 0;
  // None on a run's first step, which the throughput meter leaves out (primitive creation, page
  // faults): an empty field, not a 0 that a plot would draw.
  std::optional<double> tokens_per_s{}, mfu{};
  double peak_mb = 0;
};

class MetricsLog {
 public:
  // Creates run_dir/metrics.csv; a run resumed at `resumed_step` > 0 keeps the rows up to it
  // (the rows a crashed run wrote after its last checkpoint are dropped, not repeated).
  MetricsLog(const std::filesystem::path& run_dir, int64_t resumed_step);
  void append(const MetricsRow& row);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace acc::train
