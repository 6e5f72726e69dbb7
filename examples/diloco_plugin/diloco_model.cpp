#include "diloco_model.h"

#include <cstring>

#include "acc/autograd/grad_mode.h"
#include "acc/memory/allocator.h"
#include "acc/util/error.h"

namespace diloco {
namespace {

// Copies every parameter into `flat` (to_flat) or back out of it.
void copy_flat(const std::vector<acc::Tensor>& params, const acc::Tensor& flat, bool to_flat) {
  float* at = flat.data<float>();
  for (const acc::Tensor& p : params) {
    const size_t bytes = p.nbytes();
    if (to_flat)
      std::memcpy(at, p.raw_data(), bytes);
    else
      std::memcpy(p.raw_data(), at, bytes);
    at += p.numel();
  }
}

}  // namespace

DilocoModel::DilocoModel(std::shared_ptr<acc::models::Model> model, std::shared_ptr<acc::dist::ProcessGroup> world,
                         Options options)
    : ShardedModel("DiLoCo", std::move(model)), world_(std::move(world)), options_(options) {
  int64_t total = 0;
  for (const acc::Tensor& p : module().parameters()) {
    if (!p.requires_grad()) continue;
    ACC_CHECK(p.dtype() == acc::DType::f32, "DiLoCo: parameter ", p.describe(),
              " is not f32");
    params_.push_back(p);
    total += p.numel();
  }
  acc::memory::CategoryScope state(acc::memory::Category::optimizer_state);
  shared_ = acc::Tensor::empty({total});
  momentum_ = acc::Tensor::zeros({total});
  delta_ = acc::Tensor::empty({total});
  copy_flat(params_, shared_, true);
  world_->broadcast(shared_, 0);
  copy_flat(params_, shared_, false);
}

acc::models::ModelOutput DilocoModel::forward(const acc::data::Batch& batch) {
  if (acc::autograd::GradMode::is_enabled() && is_training()) {
    // A loop of many training steps whose optimizer never calls the hook would silently train
    // each rank alone.
    ACC_CHECK(++forwards_since_step_ <= 64 * options_.inner_steps, "DiLoCo: ", forwards_since_step_ - 1,
              " training forwards without an optimizer step through the groups of param_groups(); "
              "build the optimizer from sharded->param_groups(weight_decay)");
  }
  return module().forward(batch);
}

std::vector<std::pair<std::string, acc::Tensor>> DilocoModel::named_parameters() const {
  return module().named_parameters();
}

std::vector<acc::optim::ParamGroup> DilocoModel::param_groups(double weight_decay) const {
  acc::optim::ParamGroup decayed{.weight_decay = weight_decay}, plain{.weight_decay = 0.0};
  for (const acc::Tensor& p : params_) (decays(p.shape()) ? decayed : plain).params.push_back(p);
  auto* self = const_cast<DilocoModel*>(this);  // the hook changes the model the groups belong to
  decayed.after_step = [self] { self->after_inner_step(); };
  return {decayed, plain};
}

void DilocoModel::after_inner_step() {
  forwards_since_step_ = 0;
  if (++inner_steps_ % options_.inner_steps == 0) outer_step();
}

void DilocoModel::outer_step() {
  acc::autograd::NoGradGuard no_grad;
  copy_flat(params_, delta_, true);
  float* d = delta_.data<float>();
  float* s = shared_.data<float>();
  float* m = momentum_.data<float>();
  const int64_t n = delta_.numel();
  for (int64_t i = 0; i < n; ++i) d[i] = s[i] - d[i];
  world_->all_reduce(delta_, acc::dist::ReduceOp::avg);
  const float lr = static_cast<float>(options_.outer_lr), mu = static_cast<float>(options_.outer_momentum);
  for (int64_t i = 0; i < n; ++i) {
    m[i] = mu * m[i] + d[i];
    s[i] -= lr * (options_.nesterov ? d[i] + mu * m[i] : m[i]);
  }
  copy_flat(params_, shared_, false);
  ++outer_steps_;
}

}  // namespace diloco
