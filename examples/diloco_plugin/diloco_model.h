#pragma once
// DiLoCo (Douillard et al., 2023, arXiv 2311.08455) as an acc::ShardedModel. Every rank keeps
// the whole model and trains it on its own data with the user's optimizer (the inner steps),
// talking to no one. After every `inner_steps` optimizer steps the ranks average how far they
// moved from the last shared parameters (the outer gradient, one all-reduce of the model), and
// an outer SGD step with Nesterov momentum applies it to the shared parameters, which every
// rank then continues from:
//
//   delta = shared - local            (per rank)
//   delta = mean over ranks of delta  (the step's only communication)
//   m     = momentum * m + delta
//   shared -= outer_lr * (nesterov ? delta + momentum * m : m)
//   local  = shared
//
// With inner_steps 1, outer_lr 1 and momentum 0 this is data parallelism for an optimizer that
// is linear in the gradient (SGD): the mean of the ranks' steps. The outer step runs from the
// optimizer (the ParamGroup hook of the groups param_groups() hands out), so the user's loop
// is the single-process loop.
#include <memory>
#include <vector>

#include "acc/distributed/process_group.h"
#include "acc/strategy/sharded_model.h"

namespace diloco {

struct Options {
  int64_t inner_steps = 8;
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
  bool nesterov = true;
};

class DilocoModel : public acc::ShardedModel {
 public:
  // Rank 0's parameters become every rank's start (a broadcast over `world`).
  DilocoModel(std::shared_ptr<acc::models::Model> model, std::shared_ptr<acc::dist::ProcessGroup> world,
              Options options);

  acc::models::ModelOutput forward(const acc::data::Batch& batch) override;
  std::vector<std::pair<std::string, acc::Tensor>> named_parameters() const override;
  // Matrices decayed, the rest not; the groups carry the hook that counts inner steps.
  std::vector<acc::optim::ParamGroup> param_groups(double weight_decay) const override;
  // clip_grad_norm: the default, each rank its own gradient (whole pieces, no norm group):
  // there is nothing shared to clip between outer steps. full_parameters: the default, this
  // rank's whole pieces, equal on every rank right after an outer step.

  int64_t inner_steps_taken() const { return inner_steps_; }
  int64_t outer_steps_taken() const { return outer_steps_; }

 private:
  void after_inner_step();
  void outer_step();

  std::shared_ptr<acc::dist::ProcessGroup> world_;
  Options options_;
  std::vector<acc::Tensor> params_;  // the model's trainable parameters, in a fixed order
  acc::Tensor shared_, momentum_, delta_;  // flat f32, one element per parameter element
  int64_t inner_steps_ = 0, outer_steps_ = 0;
  int64_t forwards_since_step_ = 0;  // to catch an optimizer that never calls the hook
};

}  // namespace diloco
