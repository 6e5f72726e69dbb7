// quickstart: the loop of docs/fsdp.md, as a user writes it. A plain single-process training
// loop; the config (ACC_CONFIG_FILE, which `accelerate launch --config_file` sets) decides how
// the model is spread over the ranks. One epoch of data/brown/train.bin.
//   accelerate launch --num_processes 2 --config_file configs/fsdp_full_shard.yaml ./build/bin/quickstart
#include <acc/acc.h>   // one umbrella header for the public API

#include <cstdio>

int main(int argc, char** argv) {
  acc::Session session(argc, argv);
  auto model = std::make_shared<acc::models::GPT2>(acc::models::GPT2Config::tiny(), /*seed=*/0);
  acc::data::DataLoader loader(acc::data::TokenFile("data/brown/train.bin", 128),
                               {.batch_size = 16, .shuffle = true, .drop_last = true});
  acc::Config config = acc::Config::load();   // ACC_CONFIG_FILE (set by accelerate launch), else defaults
  config.compute.bf16 = true;                 // TorchAcc-style fields override the file
  config.dist.fsdp.wrap_layer_cls = {"GPT2Block"};
  auto [sharded, train_loader] = acc::accelerate(model, loader, config);
  acc::optim::AdamW opt(sharded->param_groups(/*weight_decay=*/0.1), {.lr = 3e-4});
  float last = 0;
  int steps = 0;
  for (auto& batch : train_loader) {
    opt.zero_grad();
    auto out = sharded->forward(batch);
    out.loss.backward();
    sharded->clip_grad_norm(1.0);
    opt.step();
    last = out.loss.item();
    ++steps;
  }
  if (acc::world().rank() == 0)
    std::printf("quickstart: %s, %d steps, last loss on rank 0 %.4f\n",
                config.strategy_name().c_str(), steps, last);
}
