#include "acc/accelerate/accelerator.h"

#include <cstdio>
#include <optional>

#include "acc/ops/ops.h"
#include "acc/runtime/init.h"

namespace acc {

Accelerator::Accelerator(AcceleratorOptions options) : options_(std::move(options)) {
  ACC_CHECK(options_.gradient_accumulation_steps >= 1,
            "Accelerator: gradient_accumulation_steps must be >= 1, got ",
            options_.gradient_accumulation_steps);
}

Accelerated Accelerator::prepare(std::shared_ptr<models::Model> model, const data::DataLoader& loader) {
  ACC_CHECK(!model_, "Accelerator::prepare: this accelerator already prepared a model; use one "
                     "Accelerator per model");
  Accelerated out = accelerate(std::move(model), loader, options_.config);
  model_ = out.model;
  return out;
}

void Accelerator::backward(const Tensor& loss) {
  const int k = options_.gradient_accumulation_steps;
  if (k == 1) {
    loss.backward();
    return;
  }
  ops::mul(loss, 1.0 / k).backward();
}

void Accelerator::accumulate(const std::function<void()>& body) {
  sync_gradients_ = ++micro_step_ % options_.gradient_accumulation_steps == 0;
  std::optional<ShardedModel::Scope> local;
  if (!sync_gradients_ && model_) local.emplace(model_->no_sync());
  body();
}

double Accelerator::clip_grad_norm(double max_norm) {
  ACC_CHECK(model_, "Accelerator::clip_grad_norm: prepare() a model first");
  return model_->clip_grad_norm(max_norm);
}

void Accelerator::register_for_checkpointing(optim::Optimizer* optimizer,
                                             optim::LRScheduler* scheduler) {
  optimizer_ = optimizer;
  scheduler_ = scheduler;
}

void Accelerator::save_state(const std::filesystem::path& dir, const checkpoint::Position& position) {
  ACC_CHECK(model_, "Accelerator::save_state: prepare() a model first");
  checkpoint::save_state(dir, {model_.get(), optimizer_, scheduler_, &options_.config, position});
}

checkpoint::Position Accelerator::load_state(const std::filesystem::path& dir) {
  ACC_CHECK(model_, "Accelerator::load_state: prepare() a model first");
  checkpoint::TrainingState state{model_.get(), optimizer_, scheduler_, &options_.config, {}};
  return checkpoint::load_state(dir, state);
}

bool Accelerator::is_main_process() const { return process_index() == 0; }
int Accelerator::process_index() const { return world().rank(); }
int Accelerator::num_processes() const { return world().size(); }

void Accelerator::print(const std::string& line) const {
  if (!is_main_process()) return;
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

void Accelerator::wait_for_everyone() const { world().barrier(); }

Tensor Accelerator::gather(const Tensor& t) const {
  ACC_CHECK(t.defined() && t.dim() >= 1, "Accelerator::gather: needs a tensor with a first "
                                         "dimension, got ", t.defined() ? t.describe() : "undefined");
  Shape shape = t.shape();
  shape[0] *= world().size();
  Tensor out = Tensor::empty(shape, t.dtype());
  world().all_gather(t.view({t.numel()}), out.view({out.numel()}));  // views carry no autograd
  return out;
}

}  // namespace acc
