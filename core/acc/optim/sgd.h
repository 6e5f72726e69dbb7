#pragma once
// SGD with PyTorch semantics (momentum, dampening, Nesterov, L2 weight decay) through
// kernels::sgd_step.
#include "acc/optim/optimizer.h"

namespace acc::optim {

struct SGDOptions {
  double lr = 1e-2;
  double momentum = 0.0;
  double dampening = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, SGDOptions options = {});
  SGD(std::vector<Tensor> params, SGDOptions options = {});

 private:
  // State: momentum_buffer (PyTorch's name), only with momentum.
  void update(const Tensor& param, const Tensor& grad, double lr, double weight_decay,
              bfloat16* bf16_copy, ParamState& state) override;

  SGDOptions options_;
};

}  // namespace acc::optim
