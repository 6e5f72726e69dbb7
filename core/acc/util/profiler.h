#pragma once
// A cheap always-compiled profiler for "where does a training step spend its time": kernels mark
// their entry points with ACC_PROFILE("name"); when profiling is off (the default) a mark costs
// one relaxed atomic load. Totals are per name, summed over threads (time inside a parallel
// kernel is counted once, on the calling thread).
#include <cstdint>
#include <string>
#include <vector>

namespace acc::profiler {

void enable(bool on);
bool enabled();
void reset();

struct Entry {
  std::string name;
  double seconds = 0;
  int64_t calls = 0;
  bool alongside = false;  // spent on another thread beside the marked ops (see add)
};
// Entries sorted by time, largest first.
std::vector<Entry> snapshot();
// The `top` largest entries as a table: name, total ms, share of all marked time, calls.
// Entries counted alongside are listed without a share and do not count in the total.
std::string report(size_t top = 20);

// Counts one call of `name` that took `seconds`, for spans a Scope cannot bracket (begun and
// ended in different calls, e.g. a collective on the communication thread). `alongside`: time
// another thread spent beside the marked ops (overlapping them), not a share of theirs.
void add(const char* name, double seconds, bool alongside = false);

class Scope {
 public:
  explicit Scope(const char* name);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  const char* name_;
  int64_t start_ns_;  // < 0 when profiling was off at entry
};

}  // namespace acc::profiler

#define ACC_PROFILE_CONCAT2(a, b) a##b
#define ACC_PROFILE_CONCAT(a, b) ACC_PROFILE_CONCAT2(a, b)
#define ACC_PROFILE(name) ::acc::profiler::Scope ACC_PROFILE_CONCAT(acc_profile_scope_, __LINE__)(name)
