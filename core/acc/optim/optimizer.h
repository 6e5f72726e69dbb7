#pragma once
// Optimizer base: parameter groups (each with its own lr / weight decay), zero_grad, and a
// step that visits every f32 parameter that has a gradient. The base owns each parameter's
// state (named tensors shaped like it, plus its step count), so checkpoints read and restore
// every optimizer the same way. State lives under memory::Category::optimizer_state, in the
// memory tier of its parameter.
#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "acc/tensor/tensor.h"

namespace acc::optim {

// Every member has a default, so designated initializers may name only some ({.params = ...}).
struct ParamGroup {
  std::vector<Tensor> params{};
  std::optional<double> lr{};            // unset: the optimizer's default
  std::optional<double> weight_decay{};  // unset: the optimizer's default
  // Optional bf16 tensors, one per param (same shapes), that each step also writes with the
  // updated values: the compute-dtype copy a mixed-precision strategy gathers.
  std::vector<Tensor> bf16_copies{};
  // Runs at the end of every step(), after all groups are updated (in group order, each group's
  // own): how a strategy that hands out the groups acts on the step (DiLoCo's outer step).
  std::function<void()> after_step{};
};

// One group holding `params` with the optimizer's defaults.
std::vector<ParamGroup> single_group(std::vector<Tensor> params);

// One parameter's optimizer state: tensors in the order of Optimizer::state_names(), each
// shaped like the parameter (none before its first step), and the steps it has taken.
struct ParamState {
  std::vector<Tensor> tensors;
  int64_t step = 0;
};

// Holds off every Optimizer::step() of this process until `ready` is: for a reader of the
// parameters and optimizer state on another thread (checkpoint::save_async copying them while
// the next forward and backward run). Several holds may be active; step() waits for them all.
void hold_steps_until(std::shared_future<void> ready);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient (under no-grad), once every hold_steps_until()
  // is ready.
  void step();
  // set_to_none drops gradients; otherwise zeroes them in place.
  void zero_grad(bool set_to_none = true);

  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  int64_t steps_taken() const { return steps_; }
  // The lr group g steps with: its own, or the optimizer's default.
  double lr(size_t group) const;

  // --- state, for checkpoints ---
  const char* name() const { return name_; }
  // The names of a parameter's state tensors ("exp_avg", "exp_avg_sq" for AdamW).
  const std::vector<std::string>& state_names() const { return state_names_; }
  const ParamState& state(size_t group, size_t index) const;
  // The state of parameter `index` of `group` for a checkpoint to fill in place: with its
  // tensors allocated (zeroed when new), or, without `allocated`, emptied (as before its first
  // step).
  ParamState& restore_state(size_t group, size_t index, bool allocated = true);
  // Tensors for that state, in the parameter's tier and counted as optimizer state, but not
  // bound and not initialised: a checkpoint reads into them before it knows the load will
  // succeed, and binds them (restore_state(group, index, false).tensors) once it does.
  std::vector<Tensor> unbound_state(size_t group, size_t index) const;
  void set_steps_taken(int64_t steps);

 protected:
  Optimizer(std::vector<ParamGroup> groups, double default_lr, double default_weight_decay,
            const char* name, std::vector<std::string> state_names);
  // One parameter's update with its group's effective hyper-parameters. `state` has its tensors
  // allocated and its step already counted (1 on the first update). It must be elementwise:
  // parameters in the file memory tier are updated a chunk at a time.
  virtual void update(const Tensor& param, const Tensor& grad, double lr, double weight_decay,
                      bfloat16* bf16_copy, ParamState& state) = 0;

 private:
  // For a parameter offloaded to files: update() over 1 MiB chunks of it, its gradient and its
  // state, each read from its file into a buffer and written back, so one chunk of each is
  // resident at a time.
  void update_streaming(const Tensor& param, const Tensor& grad, double lr, double weight_decay,
                        bfloat16* bf16_copy, ParamState& state);

  std::vector<ParamGroup> groups_;
  double default_lr_, default_weight_decay_;
  const char* name_;
  std::vector<std::string> state_names_;
  std::vector<std::vector<ParamState>> state_;  // [group][param]
  int64_t steps_ = 0;
};

}  // namespace acc::optim
