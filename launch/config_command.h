#pragma once
// accelerate config: writes an accelerate config (Hugging Face's YAML layout plus acc's keys).
//   accelerate config [--config_file F]    questions, defaults in brackets; answers come line by
//                                          line from stdin, so a script can drive it
//   accelerate config --default [--config_file F]   no questions: this machine's cores, bf16 if native
//   accelerate config show [F]             the config launch would use
//   accelerate config validate F           every problem, one per line; exit 1 if any
//   accelerate config update [F]           adds the keys this acc knows that F lacks, with their
//                                          defaults; F's own lines and comments stay as they are
// F defaults to Config::default_path() (~/.cache/acc/default_config.yaml).
#include <iosfwd>
#include <string>
#include <vector>

#include "acc/config/config.h"

namespace acc::cli {

struct Machine {
  int cores = 1;
  bool native_bf16 = false;
};
Machine this_machine();

// The questions on `out`, the answers from `in`; a bad answer is said and asked again, the end
// of the input is an error.
Config ask_config(std::istream& in, std::ostream& out, const Machine& machine);
Config default_config(const Machine& machine);
// What accelerate config validate says of a file: its problems (errors: launch would refuse
// it), one line each, and notes that do not make it invalid (warnings, accepted keys).
struct ConfigCheck {
  std::vector<std::string> problems;
  std::vector<std::string> notes;
};
ConfigCheck check_config(const std::string& path);

// `text` (a config file) with every key of `full` it lacks added, with full's value: top-level
// keys at the end, section keys (fsdp_config.*) at the end of their section. Nothing of `text`
// is changed or reordered, comments included.
std::string add_missing_keys(const std::string& text, const std::string& full);

int run_config(const std::vector<std::string>& args);

}  // namespace acc::cli
