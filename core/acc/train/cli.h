#pragma once
// Command-line options of the example programs: "--key value", "--key=value" and "--flag";
// '-' and '_' in a name are the same ("--val-every" is "--val_every"). Each option is read by
// the getters; finish() then rejects anything that was not read, naming it and the options the
// program knows, so a typo never silently runs with a default.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace acc::train {

class Args {
 public:
  Args(int argc, char** argv);

  std::string get(const std::string& key, const std::string& fallback);
  int64_t get_int(const std::string& key, int64_t fallback);
  double get_double(const std::string& key, double fallback);
  bool flag(const std::string& key);  // present without a value
  // An option whose value may be left out: nullopt when absent, "" when given bare.
  std::optional<std::string> get_optional(const std::string& key);
  bool has(const std::string& key) const;
  void finish() const;

 private:
  const std::string* value(const std::string& key);  // null when absent; marks the key known
  // By canonical name: the values (flags map to ""), the names as typed, the names the
  // program reads, as it spells them.
  std::map<std::string, std::string> values_, typed_, known_;
};

// Runs a program's body; an exception becomes one "<program>: error: <what>" line on stderr
// and exit code 1, so bad input never ends in a stack trace or a zero exit. In a job of several
// ranks the failing rank then aborts the whole job, so no peer waits for it until its timeout.
int run_program(const std::string& program, const std::function<int()>& body);

}  // namespace acc::train
