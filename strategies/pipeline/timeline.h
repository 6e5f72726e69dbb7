#pragma once
// When each action of a training step ran on this stage, for a picture of the schedule: with
// ACC_PIPELINE_TIMELINE set to a path prefix, every training step rewrites
// <prefix>.rank<R>.tsv: a first line "# step_start_s <seconds>" (the step's start on the steady
// clock, shared by the processes of one machine), then one line per action: F, B or W
// (zero_bubble's weight part), the microbatch, the chunk (0 unless interleaved), and its start
// and end in seconds from the step's start (what it computed; the gaps are waits for a neighbour).
// Under ACC_PROFILE=1 each action also counts under pipeline.forward, pipeline.backward or
// pipeline.weight (beside pipeline.compute, which holds them all).
// bench/strategies/plot_pipeline_timeline.py draws the files.
#include <chrono>
#include <string>
#include <vector>

#include "schedule.h"

namespace acc::pipeline {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;
  Timeline();  // reads ACC_PIPELINE_TIMELINE
  void begin_step() {
    step_start_ = Clock::now();
    spans_.clear();
  }
  void record(const Action& action, Clock::time_point start, Clock::time_point end);
  // Writes the step's file (when asked for); a file that cannot be written is an error naming it.
  void end_step(int rank) const;

 private:
  struct Span {
    Action action;
    double start_s, end_s;
  };
  std::string prefix_;
  Clock::time_point step_start_{};
  std::vector<Span> spans_;
};

}  // namespace acc::pipeline
