#include "acc/optim/adamw.h"

#include "acc/kernels/optimizer.h"

namespace acc::optim {

AdamW::AdamW(std::vector<ParamGroup> groups, AdamWOptions options)
    : Optimizer(std::move(groups), options.lr, options.weight_decay, "AdamW",
                {"exp_avg", "exp_avg_sq"}),
      options_(options) {}

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions options)
    : AdamW(single_group(std::move(params)), options) {}

void AdamW::update(const Tensor& param, const Tensor& grad, double lr, double weight_decay,
                   bfloat16* bf16_copy, ParamState& s) {
  const kernels::AdamWParams h{.lr = static_cast<float>(lr),
                               .beta1 = static_cast<float>(options_.beta1),
                               .beta2 = static_cast<float>(options_.beta2),
                               .eps = static_cast<float>(options_.eps),
                               .weight_decay = static_cast<float>(weight_decay),
                               .step = s.step};
  kernels::adamw_step(param.data<float>(), grad.data<float>(), s.tensors[0].data<float>(),
                      s.tensors[1].data<float>(), param.numel(), h, bf16_copy);
}

}  // namespace acc::optim
