#pragma once
// Pipeline schedules: the order in which one rank runs the forwards and backwards of a step's
// microbatches on its stages. A rank holds `chunks` stages of the model (virtual stages
// c * ranks + rank, c < chunks: more than one only when interleaved). A virtual stage's forward
// of microbatch j waits for the virtual stage before it; its backward of j for the one after
// it. Sends never block, so an order each rank follows that is consistent with those waits
// finishes (simulate() checks it).
//
//   GPipe:  every forward, then every backward: m microbatches' activations in flight at once.
//   1F1B:   rank r of p runs min(p - 1 - r, m) forwards ahead, then alternates one forward and
//           one backward, then drains: at most p - r microbatches in flight on rank r, the
//           same bubble, (p - 1) / (m + p - 1) of the step, as GPipe.
//   interleaved 1F1B (Narayanan et al., 2021): each rank holds v chunks; microbatches go
//           through the chunks in groups of p, (p - r - 1) * 2 + (v - 1) * p forwards ahead,
//           then one forward and one backward in turn. The bubble shrinks about v-fold; the
//           activations in flight grow a little, and every microbatch crosses ranks v times.
//   zero bubble (ZB-H1 of Qi et al., 2023, arXiv 2401.10241): a backward is split into the
//           input's gradient (B), which the stage before waits for, and the weights' (W),
//           which nobody waits for. Rank r runs 1F1B's order of forwards and Bs, p - r forwards
//           ahead, and a W after a B once more than r Ws are owed; the rest at the end. The
//           Ws fill the waits of 1F1B: with F, B and W of equal length the bubble is
//           (p - 1) / (3 m + p - 1), a third of 1F1B's; a rank holds at most p microbatches
//           between their forward and their W.
#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace acc::pipeline {

enum class Schedule { gpipe, one_f_one_b, interleaved_1f1b, zero_bubble };
// A step's messages are tagged below this (two per microbatch and virtual stage); an evaluation
// forward's above it (MPI promises tags up to 32767).
inline constexpr int kEvaluationTag = 30000;
// Each schedule by the name pipeline_config.schedule gives it.
inline constexpr std::array<std::pair<Schedule, std::string_view>, 4> kScheduleNames{{
    {Schedule::gpipe, "GPipe"},
    {Schedule::one_f_one_b, "1F1B"},
    {Schedule::interleaved_1f1b, "interleaved_1F1B"},
    {Schedule::zero_bubble, "zero_bubble"},
}};
// A name of kScheduleNames, in any case.
Schedule parse_schedule(const std::string& name);
std::string to_string(Schedule schedule);
std::vector<std::string> schedule_names();

struct Action {
  // A backward is the whole backward, or under zero_bubble the input's gradient only; `weight`
  // is then the weights' gradient.
  enum class Kind { forward, backward, weight };
  Kind kind = Kind::forward;
  int microbatch = 0;
  int chunk = 0;  // which of the rank's stages: virtual stage chunk * ranks + rank
  bool operator==(const Action&) const = default;
};

// What rank `rank` of `ranks` runs in one step of `microbatches` microbatches over its
// `chunks` stages, in order. Interleaved needs chunks >= 2 and microbatches a multiple of
// ranks; the others one chunk (errors name the keys).
std::vector<Action> stage_actions(Schedule schedule, int rank, int ranks, int microbatches, int chunks = 1);

// The most microbatches whose forward a rank has run and whose backward (with its weight part,
// when split) it has not, at once, in `actions`, over all its chunks: how many sets of
// activations it holds.
int peak_in_flight(const std::vector<Action>& actions);

// How long a virtual stage's forward, backward and (under zero_bubble: the backward is then the
// input's gradient only) weight part of one microbatch take.
struct StageTimes {
  double forward = 1, backward = 2, weight = 0;
};
// Every rank's actions run with the times of `stage_times` (one per virtual stage; empty: a
// forward taking 1 and a backward 2 units, split 1 and 1), each as soon as its rank is free and
// its input has arrived: the step's length, the mean share of it the ranks are idle and each
// rank's. Throws naming the rank and action when the orders deadlock.
struct Simulation {
  double step = 0, idle_share = 0;
  std::vector<double> rank_idle_share;
};
Simulation simulate(Schedule schedule, int ranks, int microbatches, int chunks = 1,
                    const std::vector<StageTimes>& stage_times = {});

}  // namespace acc::pipeline
