#pragma once
// AdamW (decoupled weight decay) through kernels::adamw_step, one pass per parameter tensor.
#include "acc/optim/optimizer.h"

namespace acc::optim {

struct AdamWOptions {
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, AdamWOptions options = {});
  AdamW(std::vector<Tensor> params, AdamWOptions options = {});
  const AdamWOptions& options() const { return options_; }

 private:
  // State: exp_avg (m) and exp_avg_sq (v), PyTorch's names.
  void update(const Tensor& param, const Tensor& grad, double lr, double weight_decay,
              bfloat16* bf16_copy, ParamState& state) override;

  AdamWOptions options_;
};

}  // namespace acc::optim
