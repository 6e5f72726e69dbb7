#include "schedule.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>

#include "acc/util/error.h"
#include "acc/util/strings.h"

namespace acc::pipeline {

Schedule parse_schedule(const std::string& name) {
  for (const auto& [schedule, known] : kScheduleNames)
    if (util::upper(known) == util::upper(name)) return schedule;
  auto names = schedule_names();
  const std::string last = names.back();
  names.pop_back();
  ACC_FAIL("pipeline_config.schedule: '", name, "' is no schedule; expected ", util::join(names), " or ", last);
}

std::string to_string(Schedule schedule) {
  for (const auto& [known, name] : kScheduleNames)
    if (known == schedule) return std::string(name);
  return "?";
}

std::vector<std::string> schedule_names() {
  std::vector<std::string> out;
  for (const auto& [schedule, name] : kScheduleNames) out.emplace_back(name);
  return out;
}

namespace {

using K = Action::Kind;

// The interleaved order: the k-th forward (or backward) of rank `rank` runs microbatch
// (k / (p v)) p + k % p on chunk (k % (p v)) / p, backwards on the chunks in reverse.
Action interleaved(int k, bool forward, int ranks, int chunks) {
  const int group = k / (ranks * chunks), within = k % (ranks * chunks);
  int chunk = within / ranks;
  if (!forward) chunk = chunks - 1 - chunk;
  return {forward ? K::forward : K::backward, group * ranks + within % ranks, chunk};
}

}  // namespace

std::vector<Action> stage_actions(Schedule schedule, int rank, int ranks, int microbatches, int chunks) {
  ACC_CHECK(rank >= 0 && rank < ranks && microbatches >= 1, "pipeline: rank ", rank, " of ", ranks, " with ",
            microbatches, " microbatches");
  std::vector<Action> out;
  if (schedule == Schedule::interleaved_1f1b) {
    ACC_CHECK(chunks >= 2, "pipeline_config.schedule: interleaved_1F1B needs pipeline_config.stages_per_rank >= 2, "
              "got ", chunks);
    ACC_CHECK(microbatches % ranks == 0, "pipeline_config.microbatches: interleaved_1F1B goes through the stages in "
              "groups of the ", ranks, " pipeline ranks; ", microbatches, " microbatches are not a multiple of ", ranks);
    const int total = microbatches * chunks;
    const int ahead = std::min(total, (ranks - rank - 1) * 2 + (chunks - 1) * ranks);
    int forwards = 0, backwards = 0;
    for (; forwards < ahead; ++forwards) out.push_back(interleaved(forwards, true, ranks, chunks));
    for (; forwards < total; ++forwards, ++backwards) {
      out.push_back(interleaved(forwards, true, ranks, chunks));
      out.push_back(interleaved(backwards, false, ranks, chunks));
    }
    for (; backwards < total; ++backwards) out.push_back(interleaved(backwards, false, ranks, chunks));
    return out;
  }
  ACC_CHECK(chunks == 1, "pipeline_config.stages_per_rank: ", chunks, " stages per rank need schedule "
            "interleaved_1F1B; ", to_string(schedule), " runs one stage per rank");
  if (schedule == Schedule::zero_bubble) {
    int forwards = 0, backwards = 0, weights = 0;
    for (; forwards < std::min(ranks - rank, microbatches); ++forwards) out.push_back({K::forward, forwards});
    while (backwards < microbatches) {
      out.push_back({K::backward, backwards++});
      if (backwards - weights > rank) out.push_back({K::weight, weights++});
      if (forwards < microbatches) out.push_back({K::forward, forwards++});
    }
    for (; weights < microbatches; ++weights) out.push_back({K::weight, weights});
    return out;
  }
  const int ahead = schedule == Schedule::gpipe ? microbatches : std::min(ranks - 1 - rank, microbatches);
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
  const bool split = std::ranges::any_of(actions, [](const Action& a) { return a.kind == K::weight; });
  const K last = split ? K::weight : K::backward;  // the action that ends a microbatch
  int now = 0, peak = 0;
  for (const Action& a : actions) {
    now += a.kind == K::forward ? 1 : a.kind == last ? -1 : 0;
    peak = std::max(peak, now);
  }
  return peak;
}

Simulation simulate(Schedule schedule, int ranks, int microbatches, int chunks,
                    const std::vector<StageTimes>& stage_times) {
  const int stages = ranks * chunks;
  ACC_CHECK(stage_times.empty() || static_cast<int>(stage_times.size()) == stages, "pipeline: simulate needs ", stages,
            " stages' times, got ", stage_times.size());
  const StageTimes unit = schedule == Schedule::zero_bubble ? StageTimes{1, 1, 1} : StageTimes{};
  std::vector<std::vector<Action>> orders;
  for (int r = 0; r < ranks; ++r) orders.push_back(stage_actions(schedule, r, ranks, microbatches, chunks));
  // When each (kind, virtual stage, microbatch) finished; a rank runs its next action once the
  // one it waits for has.
  std::map<std::tuple<K, int, int>, double> done;
  std::vector<size_t> next(static_cast<size_t>(ranks), 0);
  std::vector<double> free_at(static_cast<size_t>(ranks), 0), busy(static_cast<size_t>(ranks), 0);
  for (bool progress = true; progress;) {
    progress = false;
    for (int r = 0; r < ranks; ++r) {
      auto& at = next[static_cast<size_t>(r)];
      while (at < orders[static_cast<size_t>(r)].size()) {
        const Action& a = orders[static_cast<size_t>(r)][at];
        const int s = a.chunk * ranks + r;
        const bool forward = a.kind == K::forward;
        double ready = free_at[static_cast<size_t>(r)];
        // The input from the neighbouring stage (a weight part waits only for its own backward,
        // which ran before it on this rank).
        if (a.kind != K::weight && (forward ? s > 0 : s < stages - 1)) {
          const auto it = done.find({a.kind, forward ? s - 1 : s + 1, a.microbatch});
          if (it == done.end()) break;
          ready = std::max(ready, it->second);
        }
        const StageTimes& t = stage_times.empty() ? unit : stage_times[static_cast<size_t>(s)];
        const double cost = a.kind == K::forward ? t.forward : a.kind == K::backward ? t.backward : t.weight;
        done[{a.kind, s, a.microbatch}] = free_at[static_cast<size_t>(r)] = ready + cost;
        busy[static_cast<size_t>(r)] += cost;
        ++at;
        progress = true;
      }
    }
  }
  Simulation out;
  for (int r = 0; r < ranks; ++r) {
    const auto& order = orders[static_cast<size_t>(r)];
    const size_t at = next[static_cast<size_t>(r)];
    ACC_CHECK(at == order.size(), "pipeline: ", to_string(schedule), " deadlocks: rank ", r, " waits forever at its ",
              order[at].kind == K::forward ? "forward" : "backward", " of microbatch ", order[at].microbatch,
              " (chunk ", order[at].chunk, ")");
    out.step = std::max(out.step, free_at[static_cast<size_t>(r)]);
  }
  for (int r = 0; r < ranks; ++r)
    out.rank_idle_share.push_back(out.step > 0 ? 1.0 - busy[static_cast<size_t>(r)] / out.step : 0.0);
  out.idle_share = std::accumulate(out.rank_idle_share.begin(), out.rank_idle_share.end(), 0.0) / ranks;
  return out;
}

}  // namespace acc::pipeline
