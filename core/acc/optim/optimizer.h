#pragma once
// Optimizer base: parameter groups (each with its own lr / weight decay), zero_grad, and a
// step that visits every f32 parameter that has a gradient. Optimizer state lives under
// memory::Category::optimizer_state.
#include <cstdint>
#include <optional>
#include <vector>

#include "acc/tensor/tensor.h"

namespace acc::optim {

struct ParamGroup {
  std::vector<Tensor> params;
  std::optional<double> lr;            // unset: the optimizer's default
  std::optional<double> weight_decay;  // unset: the optimizer's default
  // Optional bf16 tensors, one per param (same shapes), that each step also writes with the
  // updated values: the compute-dtype copy a mixed-precision strategy gathers.
  std::vector<Tensor> bf16_copies;
};

// One group holding `params` with the optimizer's defaults.
std::vector<ParamGroup> single_group(std::vector<Tensor> params);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient (under no-grad).
  void step();
  // set_to_none drops gradients; otherwise zeroes them in place.
  void zero_grad(bool set_to_none = true);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  int64_t steps_taken() const { return steps_; }
  // The lr group g steps with: its own, or the optimizer's default.
  double lr(size_t group) const;

 protected:
  Optimizer(std::vector<ParamGroup> groups, double default_lr, double default_weight_decay,
            const char* name);
  // One parameter's update with its group's effective hyper-parameters.
  virtual void update(size_t group, size_t index, const Tensor& param, const Tensor& grad,
                      double lr, double weight_decay, bfloat16* bf16_copy) = 0;
  // A zeroed f32 state tensor shaped like param, counted as optimizer state.
  static Tensor new_state(const Tensor& param);

 private:
  std::vector<ParamGroup> groups_;
  double default_lr_, default_weight_decay_;
  const char* name_;
  int64_t steps_ = 0;
};

}  // namespace acc::optim
