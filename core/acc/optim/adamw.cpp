#include "acc/optim/adamw.h"

#include "acc/kernels/optimizer.h"

namespace acc::optim {

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options)
    : Optimizer(std::move(groups), options.lr, options.weight_decay, "AdamW"), options_(options) {
  for (const auto& group : param_groups()) state_.emplace_back(group.params.size());
}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : AdamW(single_group(std::move(params)), options) {}

void AdamW::update(size_t group, size_t index, const Tensor& param, const Tensor& grad, double lr,
                   double weight_decay, bfloat16* bf16_copy) {
  State& s = state_[group][index];
  if (!s.m.defined()) {
    s.m = new_state(param);
    s.v = new_state(param);
  }
  ++s.step;
  const kernels::AdamWParams h{.lr = static_cast<float>(lr),
                               .beta1 = static_cast<float>(options_.beta1),
                               .beta2 = static_cast<float>(options_.beta2),
                               .eps = static_cast<float>(options_.eps),
                               .weight_decay = static_cast<float>(weight_decay),
                               .step = s.step};
  kernels::adamw_step(param.data<float>(), grad.data<float>(), s.m.data<float>(), s.v.data<float>(),
                      param.numel(), h, bf16_copy);
}

}  // namespace acc::optim
