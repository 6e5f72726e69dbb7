#include "acc/train/metrics_log.h"

#include <sstream>
#include <string>
#include <vector>

#include "acc/util/error.h"

namespace acc::train {

namespace {
constexpr const char* kHeader = "step,loss,val_loss,lr,grad_norm,tokens_per_s,mfu,peak_mb";
}

MetricsLog::MetricsLog(const std::filesystem::path& run_dir, int64_t resumed_step)
    : path_(run_dir / "metrics.csv") {
  std::filesystem::create_directories(run_dir);
  std::vector<std::string> kept;
  if (resumed_step > 0) {
    std::ifstream old(path_);
    std::string line;
    std::getline(old, line);  // the header
    while (std::getline(old, line))
      if (std::stoll(line.substr(0, line.find(','))) <= resumed_step) kept.push_back(line);
  }
  out_.open(path_, std::ios::trunc);
  ACC_CHECK(out_.is_open(), "cannot write ", path_.string());
  out_ << kHeader << "\n";
  for (const auto& line : kept) out_ << line << "\n";
  out_.flush();
}

void MetricsLog::append(const MetricsRow& r) {
  out_ << r.step << ',' << r.loss << ',';
  if (r.val_loss) out_ << *r.val_loss;
  out_ << ',' << r.lr << ',' << r.grad_norm << ',';
  if (r.tokens_per_s) out_ << *r.tokens_per_s;
  out_ << ',';
  if (r.mfu) out_ << *r.mfu;
  out_ << ',' << r.peak_mb << '\n';
  out_.flush();
}

}  // namespace acc::train
