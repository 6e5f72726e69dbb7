#include "acc/util/activity.h"

#include <atomic>

namespace acc::activity {
namespace {

std::atomic<int64_t> g_step{0};
thread_local const char* t_phase = nullptr;
thread_local std::string_view t_unit;
thread_local const char* t_unit_kind = nullptr;  // null: no unit

}  // namespace

void set_step(int64_t step) { g_step.store(step, std::memory_order_relaxed); }
int64_t step() { return g_step.load(std::memory_order_relaxed); }

Phase::Phase(const char* name) : previous_(t_phase) { t_phase = name; }
Phase::~Phase() { t_phase = previous_; }

Unit::Unit(std::string_view name, const char* kind) : previous_(t_unit), previous_kind_(t_unit_kind) {
  t_unit = name;
  t_unit_kind = kind;
}
Unit::~Unit() {
  t_unit = previous_;
  t_unit_kind = previous_kind_;
}

std::string describe() {
  std::string out;
  auto part = [&out](std::string_view text) {
    if (!out.empty()) out += ", ";
    out += text;
  };
  if (const int64_t s = step(); s > 0) part("step " + std::to_string(s));
  if (t_phase) part(t_phase);
  if (t_unit_kind) {  // "unit transformer.h.3", "parameter first.bias", "root unit"
    std::string unit = t_unit.empty() ? "root " : "";
    unit.append(t_unit_kind);
    if (!t_unit.empty()) unit.append(" ").append(t_unit);
    part(unit);
  }
  return out;
}

}  // namespace acc::activity
