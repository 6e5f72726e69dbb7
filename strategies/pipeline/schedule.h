#pragma once
// Pipeline schedules: the order in which one stage runs the forwards and backwards of a step's
// microbatches. A stage's forward of microbatch j waits for the stage before it; its backward
// of j for the stage after it. Sends never block, so any order each stage follows that is
// consistent with those waits finishes.
//
//   GPipe: every forward, then every backward: m microbatches' activations in flight at once.
//   1F1B:  stage s of p runs min(p - 1 - s, m) forwards ahead, then alternates one forward and
//          one backward, then drains: at most p - s microbatches in flight on stage s, the same
//          bubble, (p - 1) / (m + p - 1) of the step, as GPipe.
#include <string>
#include <vector>

namespace acc::pipeline {

enum class Schedule { gpipe, one_f_one_b };
Schedule parse_schedule(const std::string& name);  // "GPipe", "1F1B" (any case)
std::string to_string(Schedule schedule);

struct Action {
  enum class Kind { forward, backward };
  Kind kind = Kind::forward;
  int microbatch = 0;
  bool operator==(const Action&) const = default;
};

// What stage `stage` of `stages` runs in one step of `microbatches` microbatches, in order.
std::vector<Action> stage_actions(Schedule schedule, int stage, int stages, int microbatches);

// The most microbatches whose forward a stage has run and whose backward it has not, at once,
// in `actions`: how many sets of activations it holds.
int peak_in_flight(const std::vector<Action>& actions);

}  // namespace acc::pipeline
