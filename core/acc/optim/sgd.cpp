#include "acc/optim/sgd.h"

#include "acc/kernels/optimizer.h"

namespace acc::optim {

SGD::SGD(std::vector<ParamGroup> groups, SGDOptions options)
    : Optimizer(std::move(groups), options.lr, options.weight_decay, "SGD",
                options.momentum != 0 ? std::vector<std::string>{"momentum_buffer"}
                                      : std::vector<std::string>{}),
      options_(options) {
  ACC_CHECK(!options.nesterov || (options.momentum > 0 && options.dampening == 0),
            "SGD: nesterov needs momentum > 0 and dampening 0, got momentum ", options.momentum,
            ", dampening ", options.dampening);
}

SGD::SGD(std::vector<Tensor> params, SGDOptions options)
    : SGD(single_group(std::move(params)), options) {}

void SGD::update(const Tensor& param, const Tensor& grad, double lr, double weight_decay,
                 bfloat16* bf16_copy, ParamState& state) {
  const Tensor buf = state.tensors.empty() ? Tensor() : state.tensors[0];
  const bool first = buf.defined() && state.step == 1;
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
