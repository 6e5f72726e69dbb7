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
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "acc/accelerate/accelerate.h"
#include "acc/checkpoint/checkpoint.h"

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

  // --- checkpoints (acc/checkpoint/checkpoint.h) ---
  // The optimizer and LR scheduler save_state() saves and load_state() restores with the
  // prepared model (either may be null).
  void register_for_checkpointing(optim::Optimizer* optimizer, optim::LRScheduler* scheduler = nullptr);
  // Saves model, registered optimizer and scheduler, the config and `position` to `dir`
  // (whole tensors when the strategy's section asks for them: fsdp_state_dict_type). A collective.
  void save_state(const std::filesystem::path& dir, const checkpoint::Position& position);
  // Restores them from `dir`; returns the saved position. A collective.
  checkpoint::Position load_state(const std::filesystem::path& dir);

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
  optim::Optimizer* optimizer_ = nullptr;
  optim::LRScheduler* scheduler_ = nullptr;
  int micro_step_ = 0;
  bool sync_gradients_ = true;
};

}  // namespace acc
