#pragma once
// acc::Accelerator: the same engine as acc::accelerate(), in Hugging Face accelerate's style,
// for users who know that API:
//
//   acc::Accelerator accelerator({.gradient_accumulation_steps = 4});
//   auto [model, loader] = accelerator.prepare(std::make_shared<GPT2>(...), DataLoader(...));
//   acc::optim::AdamW opt(model->param_groups(0.1), {.lr = 3e-4});
//   for (auto& batch : loader)
//     accelerator.accumulate([&] {
//       accelerator.backward(model->forward(batch).loss);
//       if (accelerator.sync_gradients()) {
//         accelerator.clip_grad_norm(1.0);
//         opt.step();
//         opt.zero_grad();
//       }
//     });
//   accelerator.print("done");
#include <functional>
#include <memory>
#include <string>

#include "acc/accelerate/accelerate.h"

namespace acc {

struct AcceleratorOptions {
  Config config = Config::load();  // ACC_CONFIG_FILE, else the defaults
  // Micro-batches whose gradients add up before one optimizer step; backward() divides each
  // loss by it, so the step sees the mean over the micro-batches.
  int gradient_accumulation_steps = 1;
};

class Accelerator {
 public:
  // acc::init (or an acc::Session) must have run.
  explicit Accelerator(AcceleratorOptions options = {});

  // Wraps the model with the config's strategy and cuts the loader to this rank's slices.
  // One model per Accelerator.
  Accelerated prepare(std::shared_ptr<models::Model> model, const data::DataLoader& loader);

  // loss.backward(), the loss divided by gradient_accumulation_steps.
  void backward(const Tensor& loss);
  // Runs one micro-step: body() and, on every gradient_accumulation_steps-th call,
  // sync_gradients() is true inside it (the step on which to clip and step the optimizer).
  // The other micro-steps run inside the model's no_sync(): no gradient is communicated until
  // the syncing one, which reduces the sum once.
  void accumulate(const std::function<void()>& body);
  bool sync_gradients() const { return sync_gradients_; }
  // Clips the prepared model's gradients by the global norm; returns the norm before.
  double clip_grad_norm(double max_norm);

  // --- the job ---
  bool is_main_process() const;  // world rank 0
  int process_index() const;
  int num_processes() const;
  void print(const std::string& line) const;  // on the main process only, with a newline
  void wait_for_everyone() const;              // a barrier over every rank
  // Every rank's tensor, concatenated along dim 0 in rank order (same shape on every rank).
  Tensor gather(const Tensor& t) const;

  const Config& config() const { return options_.config; }

 private:
  AcceleratorOptions options_;
  std::shared_ptr<ShardedModel> model_;
  int micro_step_ = 0;
  bool sync_gradients_ = true;
};

}  // namespace acc
