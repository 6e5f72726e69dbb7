#include "mpirun_messages.h"

#include <regex>

namespace acc::cli {
namespace {

bool is_rule(const std::string& line) { return line.size() >= 20 && line.find_first_not_of('-') == std::string::npos; }

// "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD" and "with errorcode 1."
std::string abort_summary(const std::vector<std::string>& banner) {
  static const std::regex invoked(R"(MPI_ABORT was invoked on rank (\d+))"), code(R"(with errorcode (-?\d+))");
  std::string rank, error;
  std::smatch m;
  for (const auto& line : banner) {
    if (std::regex_search(line, m, invoked)) rank = m[1];
    if (std::regex_search(line, m, code)) error = m[1];
  }
  if (rank.empty()) return {};
  return "accelerate launch: rank " + rank + " ended the job (MPI_ABORT" +
         (error.empty() ? "" : ", error code " + error) + "); its error is above";
}

}  // namespace

std::vector<std::string> MpirunMessages::take(const std::string& line) {
  if (raw_) return {line};
  if (in_banner_) {
    banner_.push_back(line);
    if (!is_rule(line)) return {};
    in_banner_ = false;
    std::vector<std::string> out;
    if (const std::string summary = abort_summary(banner_); !summary.empty())
      out.push_back(summary);
    else
      out.swap(banner_);
    banner_.clear();
    return out;
  }
  if (is_rule(line)) {
    in_banner_ = true;
    banner_ = {line};
    return {};
  }
  static const std::regex aggregate(R"(more process(es)? ha(s|ve) sent help message help-mpi-api\.txt / mpi-abort)");
  if (std::regex_search(line, aggregate)) {
    dropped_aggregate_ = true;
    return {};
  }
  if (dropped_aggregate_ && line.find("orte_base_help_aggregate") != std::string::npos) {
    dropped_aggregate_ = false;
    return {};
  }
  if (line.find("ORTE_ERROR_LOG") != std::string::npos && line.find("show_help.c") != std::string::npos)
    return {};
  return {line};
}

std::vector<std::string> MpirunMessages::finish() {
  std::vector<std::string> out;
  out.swap(banner_);
  in_banner_ = false;
  return out;
}

}  // namespace acc::cli
