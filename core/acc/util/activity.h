#pragma once
// What this process is doing, in words, for the messages of a collective that failed, timed out
// or was entered in a different order on another rank: "step 12, backward, unit transformer.h.3".
// The training step is process-wide (the optimizer counts it); the phase and the unit belong to
// the thread that set them, in nested scopes, so a collective is labelled by what the thread
// that issued it was doing. Labels are compared across ranks, so they must be the same on
// every rank for the same collective: name only what every rank does alike.
#include <cstdint>
#include <string>
#include <string_view>

namespace acc::activity {

// The training step now being computed, counted from 1; 0: none (no optimizer yet).
void set_step(int64_t step);
int64_t step();

// "forward", "backward", "optimizer step", "checkpoint save", ... while the scope lives. The
// name must outlive the scope (a literal).
class Phase {
 public:
  explicit Phase(const char* name);
  ~Phase();
  Phase(const Phase&) = delete;
  Phase& operator=(const Phase&) = delete;

 private:
  const char* previous_;
};

// The sharding unit (or, with kind "parameter", the parameter) whose communication this thread
// is issuing ("" is the root unit). The name must outlive the scope.
class Unit {
 public:
  explicit Unit(std::string_view name, const char* kind = "unit");
  ~Unit();
  Unit(const Unit&) = delete;
  Unit& operator=(const Unit&) = delete;

 private:
  std::string_view previous_;
  const char* previous_kind_;
};

// "step 12, backward, unit transformer.h.3"; the parts not known are left out ("" if none).
std::string describe();

}  // namespace acc::activity
