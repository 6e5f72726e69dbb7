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
  struct State {
    Tensor m, v;
    int64_t step = 0;
  };
  void update(size_t group, size_t index, const Tensor& param, const Tensor& grad, double lr,
              double weight_decay, bfloat16* bf16_copy) override;

  AdamWOptions options_;
  std::vector<std::vector<State>> state_;  // [group][param], created on first update
};

}  // namespace acc::optim
