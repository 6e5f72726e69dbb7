#include "acc/optim/optimizer.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "acc/autograd/grad_mode.h"
#include "acc/memory/allocator.h"
#include "acc/util/activity.h"
#include "acc/util/profiler.h"

namespace acc::optim {

namespace {

std::mutex g_holds_mutex;
std::vector<std::shared_future<void>> g_holds;  // hold_steps_until

void wait_for_holds() {
  std::vector<std::shared_future<void>> holds;
  {
    std::lock_guard lock(g_holds_mutex);
    holds.swap(g_holds);
  }
  if (holds.empty()) return;
  ACC_PROFILE("checkpoint.wait");  // what the step waited for an asynchronous save's copy
  for (const auto& ready : holds) ready.wait();
}

}  // namespace

void hold_steps_until(std::shared_future<void> ready) {
  std::lock_guard lock(g_holds_mutex);
  g_holds.push_back(std::move(ready));
}

std::vector<ParamGroup> single_group(std::vector<Tensor> params) {
  ParamGroup group;
  group.params = std::move(params);
  return {std::move(group)};
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, double default_lr,
                     double default_weight_decay, const char* name,
                     std::vector<std::string> state_names)
    : groups_(std::move(groups)),
      default_lr_(default_lr),
      default_weight_decay_(default_weight_decay),
      name_(name),
      state_names_(std::move(state_names)) {
  for (const auto& group : groups_) state_.emplace_back(group.params.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    const ParamGroup& group = groups_[g];
    ACC_CHECK(group.bf16_copies.empty() || group.bf16_copies.size() == group.params.size(), name_,
              ": group ", g, " has ", group.bf16_copies.size(), " bf16 copies for ",
              group.params.size(), " parameters");
    for (size_t i = 0; i < group.params.size(); ++i) {
      const Tensor& p = group.params[i];
      ACC_CHECK(p.defined() && p.dtype() == DType::f32, name_, ": group ", g, " parameter ", i,
                " is ", p.defined() ? p.describe() : std::string("undefined"),
                "; optimizers step f32 master parameters only");
      if (!group.bf16_copies.empty()) {
        const Tensor& c = group.bf16_copies[i];
        ACC_CHECK(c.defined() && c.dtype() == DType::bf16 && c.shape() == p.shape(), name_,
                  ": bf16 copy ", i, " of group ", g, " is ",
                  c.defined() ? c.describe() : std::string("undefined"), " but the parameter is ",
                  p.describe());
      }
    }
  }
  activity::set_step(steps_ + 1);
}

void Optimizer::step() {
  autograd::NoGradGuard no_grad;
  activity::Phase phase("optimizer step");
  wait_for_holds();
  ++steps_;
  for (size_t g = 0; g < groups_.size(); ++g) {
    ParamGroup& group = groups_[g];
    const double lr = this->lr(g);
    const double wd = group.weight_decay.value_or(default_weight_decay_);
    for (size_t i = 0; i < group.params.size(); ++i) {
      const Tensor& p = group.params[i];
      Tensor grad = p.grad();
      if (!grad.defined()) continue;
      ACC_CHECK(grad.dtype() == DType::f32 && grad.shape() == p.shape(), name_, ": gradient ",
                grad.describe(), " of parameter ", p.describe(), " must be f32 of the same shape");
      bfloat16* copy = group.bf16_copies.empty() ? nullptr : group.bf16_copies[i].data<bfloat16>();
      ParamState& state = restore_state(g, i);
      ++state.step;
      if (p.storage()->tier() == memory::Tier::file)
        update_streaming(p, grad, lr, wd, copy, state);
      else
        update(p, grad, lr, wd, copy, state);
    }
  }
  for (const ParamGroup& group : groups_)
    if (group.after_step) group.after_step();
  activity::set_step(steps_ + 1);  // the step the next forward belongs to
}

void Optimizer::set_steps_taken(int64_t steps) {
  steps_ = steps;
  activity::set_step(steps_ + 1);
}

void Optimizer::update_streaming(const Tensor& param, const Tensor& grad, double lr, double weight_decay,
                                 bfloat16* bf16_copy, ParamState& state) {
  // Each 1 MiB of the master, its gradient and its state is read out of its file into a buffer
  // that stays mapped, updated there and written back (pread/pwrite). Updating the mapped pages
  // in place cost a fault per 4 KiB page, which on a VM with a paravirtualised MMU is a trip
  // through the hypervisor: bench_offload's step from the page cache took 1.4-1.8 s that way and
  // 0.7-0.8 s this way. Reading ahead is left to the kernel: POSIX_FADV_WILLNEED 4 or 16 MiB
  // ahead did not speed the step from disk and slowed the cached one to 1.3-1.5 s.
  constexpr int64_t kChunk = int64_t{1} << 18;  // 1 MiB of f32 per tensor at a time
  const int64_t n = param.numel();
  std::vector<const Tensor*> files{&param, &grad};
  for (const Tensor& t : state.tensors) files.push_back(&t);
  std::vector<Tensor> buffers;
  for (size_t k = 0; k < files.size(); ++k) buffers.push_back(Tensor::empty({std::min(kChunk, n)}));
  auto at_element = [](const Tensor& t, int64_t at) { return t.data<float>() + at; };
  for (int64_t at = 0; at < n; at += kChunk) {
    const int64_t len = std::min(kChunk, n - at);
    const size_t bytes = static_cast<size_t>(len) * sizeof(float);
    std::vector<Tensor> pieces;
    for (size_t k = 0; k < files.size(); ++k) {
      pieces.push_back(buffers[k].narrow(0, len));
      memory::read_block(at_element(*files[k], at), bytes, pieces[k].data<float>(), files[k]->storage()->tier());
    }
    ParamState chunk{{pieces.begin() + 2, pieces.end()}, state.step};
    update(pieces[0], pieces[1], lr, weight_decay, bf16_copy ? bf16_copy + at : nullptr, chunk);
    for (size_t k = 0; k < files.size(); ++k) {
      if (k != 1)  // the gradient is only read
        memory::write_block(at_element(*files[k], at), bytes, pieces[k].data<float>(), files[k]->storage()->tier());
      // What the forward and backward mapped in (the gradient's sums) leaves resident memory.
      memory::page_out(at_element(*files[k], at), bytes, files[k]->storage()->tier());
    }
  }
}

double Optimizer::lr(size_t group) const {
  ACC_CHECK(group < groups_.size(), name_, ": no parameter group ", group, " (it has ",
            groups_.size(), ")");
  return groups_[group].lr.value_or(default_lr_);
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& group : groups_)
    for (auto& p : group.params) {
      if (!p.grad().defined()) continue;
      if (set_to_none)
        Tensor(p).set_grad(Tensor());
      else
        p.grad().zero_();
    }
}

const ParamState& Optimizer::state(size_t group, size_t index) const {
  ACC_CHECK(group < state_.size() && index < state_[group].size(), name_, ": no parameter ",
            index, " in group ", group);
  return state_[group][index];
}

ParamState& Optimizer::restore_state(size_t group, size_t index, bool allocated) {
  ParamState& s = const_cast<ParamState&>(state(group, index));
  if (!allocated) s = ParamState{};
  if (!allocated || s.tensors.size() == state_names_.size()) return s;
  s.tensors = unbound_state(group, index);
  for (Tensor& t : s.tensors) t.zero_();
  return s;
}

std::vector<Tensor> Optimizer::unbound_state(size_t group, size_t index) const {
  state(group, index);  // checks the indices
  // The state lives in the parameter's tier: offloaded masters get offloaded state.
  const Tensor& param = groups_[group].params[index];
  memory::CategoryScope scope(memory::Category::optimizer_state);
  memory::TierScope tier(param.storage()->tier());
  std::vector<Tensor> out;
  for (size_t k = 0; k < state_names_.size(); ++k) out.push_back(Tensor::empty(param.shape()));
  return out;
}

}  // namespace acc::optim
