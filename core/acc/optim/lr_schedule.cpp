#include "acc/optim/lr_schedule.h"

#include <cmath>
#include <numbers>

namespace acc::optim {

LRSchedule constant_lr(double lr) {
  return [lr](int64_t) { return lr; };
}

LRSchedule warmup_cosine_lr(double max_lr, double min_lr, int64_t warmup_steps, int64_t decay_steps) {
  ACC_CHECK(warmup_steps >= 0 && decay_steps >= warmup_steps && min_lr <= max_lr,
            "warmup_cosine_lr: expected 0 <= warmup_steps (", warmup_steps, ") <= decay_steps (",
            decay_steps, ") and min_lr (", min_lr, ") <= max_lr (", max_lr, ")");
  return [=](int64_t step) {
    if (step < warmup_steps)
      return max_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
    if (step >= decay_steps) return min_lr;
    const double progress = static_cast<double>(step - warmup_steps) /
                            static_cast<double>(decay_steps - warmup_steps);
    return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * progress)) * (max_lr - min_lr);
  };
}

LRScheduler::LRScheduler(Optimizer& optimizer, LRSchedule schedule, double peak_lr)
    : optimizer_(optimizer), schedule_(std::move(schedule)) {
  ACC_CHECK(peak_lr > 0, "LRScheduler: peak_lr must be positive, got ", peak_lr);
  for (size_t g = 0; g < optimizer_.param_groups().size(); ++g)
    scale_.push_back(optimizer_.lr(g) / peak_lr);
  apply(0);
}

void LRScheduler::apply(int64_t step) {
  step_ = step;
  const double lr = schedule_(step);
  auto& groups = optimizer_.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) groups[g].lr = lr * scale_[g];
}

}  // namespace acc::optim
