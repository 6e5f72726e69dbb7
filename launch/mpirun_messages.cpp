#include "mpirun_messages.h"

#include <optional>
#include <regex>

namespace acc::cli {
namespace {

bool is_rule(const std::string& line) { return line.size() >= 20 && line.find_first_not_of('-') == std::string::npos; }

// The first match of `pattern`'s group 1 in the banner's lines, or "".
std::string find_in(const std::vector<std::string>& banner, const std::regex& pattern) {
  std::smatch m;
  for (const auto& line : banner)
    if (std::regex_search(line, m, pattern)) return m[1];
  return {};
}

// What a banner about the end of the job comes to: one line, nothing (it repeats another), or
// nullopt for any other banner, shown as it is.
std::optional<std::vector<std::string>> summary_of(const std::vector<std::string>& banner) {
  static const std::regex invoked(R"(MPI_ABORT was invoked on rank (\d+))"), error_code(R"(with errorcode (-?\d+))");
  static const std::regex exited(R"((exited with non-zero status))"), process(R"(Process name: \[\[\d+,\d+\],(\d+)\])"),
      exit_code(R"(Exit code:\s*(-?\d+))"), primary(R"((Primary job\s+terminated normally))");
  if (const std::string rank = find_in(banner, invoked); !rank.empty()) {
    const std::string code = find_in(banner, error_code);
    return std::vector<std::string>{"accelerate launch: rank " + rank + " ended the job (MPI_ABORT" +
                                    (code.empty() ? "" : ", error code " + code) + "); its error is above"};
  }
  if (!find_in(banner, exited).empty()) {
    const std::string rank = find_in(banner, process), code = find_in(banner, exit_code);
    if (!rank.empty() && !code.empty())
      return std::vector<std::string>{"accelerate launch: rank " + rank + " exited with status " + code};
  }
  if (!find_in(banner, primary).empty()) return std::vector<std::string>{};  // the next banner says it
  return std::nullopt;
}

}  // namespace

std::vector<std::string> MpirunMessages::take(const std::string& line) {
  if (raw_) return {line};
  if (in_banner_) {
    banner_.push_back(line);
    if (!is_rule(line)) return {};
    in_banner_ = false;
    auto summary = summary_of(banner_);
    std::vector<std::string> out = summary ? std::move(*summary) : std::move(banner_);
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
  if (line.starts_with("mpirun: Forwarding signal")) return {};  // launch says why it sent it
  return {line};
}

std::vector<std::string> MpirunMessages::finish() {
  std::vector<std::string> out;
  out.swap(banner_);
  in_banner_ = false;
  return out;
}

}  // namespace acc::cli
