#include "acc/util/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>

namespace acc::profiler {
namespace {

std::atomic<bool> g_enabled{false};
// Nested marks on one thread are not double counted: only the outermost scope records.
thread_local int t_depth = 0;

struct Totals {
  std::mutex mu;
  std::map<std::string, Entry> by_name;
};
Totals& totals() {
  static Totals t;
  return t;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

void enable(bool on) { g_enabled.store(on, std::memory_order_relaxed); }
bool enabled() { return g_enabled.load(std::memory_order_relaxed); }

void reset() {
  std::lock_guard lock(totals().mu);
  totals().by_name.clear();
}

std::vector<Entry> snapshot() {
  std::vector<Entry> out;
  {
    std::lock_guard lock(totals().mu);
    for (const auto& [name, e] : totals().by_name) out.push_back(e);
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) { return a.seconds > b.seconds; });
  return out;
}

std::string report(size_t top) {
  const auto entries = snapshot();
  double total = 0;
  for (const auto& e : entries)
    if (!e.alongside) total += e.seconds;
  std::string out;
  char line[160];
  for (size_t i = 0; i < std::min(top, entries.size()); ++i) {
    const Entry& e = entries[i];
    char share[16] = "alongside";
    if (!e.alongside) std::snprintf(share, sizeof share, "%5.1f%%", total > 0 ? 100.0 * e.seconds / total : 0.0);
    std::snprintf(line, sizeof line, "  %-30s %10.1f ms %9s %8lld calls\n", e.name.c_str(), 1e3 * e.seconds,
                  share, static_cast<long long>(e.calls));
    out += line;
  }
  return out;
}

Scope::Scope(const char* name) : name_(name), start_ns_(-1) {
  if (enabled() && t_depth++ == 0) start_ns_ = now_ns();
  else if (enabled()) start_ns_ = -2;  // nested: counted in the outer scope
}

Scope::~Scope() {
  if (start_ns_ == -1) return;
  --t_depth;
  if (start_ns_ < 0) return;
  add(name_, static_cast<double>(now_ns() - start_ns_) * 1e-9);
}

void add(const char* name, double seconds, bool alongside) {
  std::lock_guard lock(totals().mu);
  Entry& e = totals().by_name[name];
  e.name = name;
  e.seconds += seconds;
  ++e.calls;
  e.alongside = alongside;
}

}  // namespace acc::profiler
