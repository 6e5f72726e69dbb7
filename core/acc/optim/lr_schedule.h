#pragma once
// Learning-rate schedules as functions of the (0-based) step, and a scheduler that applies one
// to an optimizer's groups. Each group keeps its initial lr ratio to the schedule's peak, so
// groups with different lrs follow the same shape.
#include <cstdint>
#include <functional>
#include <vector>

#include "acc/optim/optimizer.h"

namespace acc::optim {

using LRSchedule = std::function<double(int64_t step)>;

LRSchedule constant_lr(double lr);
// Linear warmup from max_lr/warmup_steps to max_lr over steps [0, warmup_steps), then cosine
// decay to min_lr at decay_steps; min_lr after that (the nanoGPT schedule).
LRSchedule warmup_cosine_lr(double max_lr, double min_lr, int64_t warmup_steps, int64_t decay_steps);

class LRScheduler {
 public:
  // peak_lr is the schedule's reference value (its max); a group whose lr was x at construction
  // then gets schedule(step) * x / peak_lr. Applies step 0 immediately.
  LRScheduler(Optimizer& optimizer, LRSchedule schedule, double peak_lr);
  // Moves to `step` and sets every group's lr.
  void apply(int64_t step);
  // Advances by one step.
  void step() { apply(step_ + 1); }
  int64_t current_step() const { return step_; }

 private:
  Optimizer& optimizer_;
  LRSchedule schedule_;
  std::vector<double> scale_;  // per group
  int64_t step_ = 0;
};

}  // namespace acc::optim
