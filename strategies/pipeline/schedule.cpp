#include "schedule.h"

#include <algorithm>
#include <cctype>

#include "acc/util/error.h"

namespace acc::pipeline {

Schedule parse_schedule(const std::string& name) {
  std::string upper = name;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (upper == "GPIPE") return Schedule::gpipe;
  if (upper == "1F1B") return Schedule::one_f_one_b;
  ACC_FAIL("pipeline_config.schedule: '", name, "' is no schedule; expected GPipe or 1F1B");
}

std::string to_string(Schedule schedule) { return schedule == Schedule::gpipe ? "GPipe" : "1F1B"; }

std::vector<Action> stage_actions(Schedule schedule, int stage, int stages, int microbatches) {
  ACC_CHECK(stage >= 0 && stage < stages && microbatches >= 1, "pipeline: stage ", stage, " of ", stages, " with ",
            microbatches, " microbatches");
  using K = Action::Kind;
  std::vector<Action> out;
  const int ahead = schedule == Schedule::gpipe ? microbatches : std::min(stages - 1 - stage, microbatches);
  int forwards = 0, backwards = 0;
  for (; forwards < ahead; ++forwards) out.push_back({K::forward, forwards});
  for (; forwards < microbatches; ++forwards, ++backwards) {
    out.push_back({K::forward, forwards});
    out.push_back({K::backward, backwards});
  }
  for (; backwards < microbatches; ++backwards) out.push_back({K::backward, backwards});
  return out;
}

int peak_in_flight(const std::vector<Action>& actions) {
  int now = 0, peak = 0;
  for (const Action& a : actions) {
    now += a.kind == Action::Kind::forward ? 1 : -1;
    peak = std::max(peak, now);
  }
  return peak;
}

}  // namespace acc::pipeline
