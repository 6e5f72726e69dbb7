#include "acc/optim/sgd.h"

#include "acc/kernels/optimizer.h"

namespace acc::optim {

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options)
    : Optimizer(std::move(groups), options.lr, options.weight_decay, "SGD"), options_(options) {
  ACC_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0),
            "SGD: nesterov needs momentum > 0 and dampening 0, got momentum ", options.momentum,
            ", dampening ", options.dampening);
  for (const auto& group : param_groups()) momentum_.emplace_back(group.params.size());
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : SGD(single_group(std::move(params)), options) {}

void SGD::update(size_t group, size_t index, const Tensor& param, const Tensor& grad, double lr,
                 double weight_decay, bfloat16* bf16_copy) {
  Tensor& buf = momentum_[group][index];
  const bool first = options_.momentum != 0 && !buf.defined();
  if (first) buf = new_state(param);
  const kernels::SGDParams h{.lr = static_cast<float>(lr),
                             .momentum = static_cast<float>(options_.momentum),
                             .dampening = static_cast<float>(options_.dampening),
                             .weight_decay = static_cast<float>(weight_decay),
                             .nesterov = options_.nesterov,
                             .first_step = first};
  kernels::sgd_step(param.data<float>(), grad.data<float>(), buf.defined() ? buf.data<float>() : nullptr,
                    param.numel(), h, bf16_copy);
}

}  // namespace acc::optim
