// train_fashion_mnist: a small CNN (or an MLP) on Fashion-MNIST, test accuracy at the end.
//   ./build/bin/train_fashion_mnist --model cnn    (5 epochs; --model mlp for the MLP)
//   accelerate launch --num_processes 2 --config_file configs/fsdp_no_shard.yaml
//     ./build/bin/train_fashion_mnist            (one line; any config; --batch is global)
// Data: Debian's dataset-fashion-mnist (scripts/fetch-data installs it), or --data DIR holding
// {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "acc/accelerate/accelerate.h"
#include "acc/autograd/grad_mode.h"
#include "acc/data/dataloader.h"
#include "acc/data/idx.h"
#include "acc/models/classifiers.h"
#include "acc/models/checkpoint.h"
#include "acc/optim/optim.h"
#include "acc/runtime/init.h"
#include "acc/runtime/threads.h"
#include "acc/train/cli.h"
#include "acc/train/progress.h"

namespace {

using namespace acc;

// Fraction of the set whose argmax logit is the label: each rank scores its slice.
double accuracy(models::Model& model, const data::DataLoader& loader) {
  autograd::NoGradGuard no_grad;
  model.eval();
  int64_t right = 0, total = 0;
  for (auto& batch : loader) {
    const auto logits = model.forward(batch).logits;
    const auto labels = batch["labels"].to_vector_i64();
    const int64_t classes = logits.size(1);
    const float* z = logits.data<float>();
    for (size_t i = 0; i < labels.size(); ++i) {
      const float* row = z + static_cast<int64_t>(i) * classes;
      right += std::max_element(row, row + classes) - row == labels[i];
    }
    total += static_cast<int64_t>(labels.size());
  }
  model.train();
  Tensor counts = Tensor::from_vector_i64({right, total}, {2});
  world().all_reduce(counts);
  const auto summed = counts.to_vector_i64();
  return summed[1] ? static_cast<double>(summed[0]) / static_cast<double>(summed[1]) : 0.0;
}

constexpr const char* kUsage = R"(usage: train_fashion_mnist [options]
  --model cnn|mlp      the model [cnn]
  --data DIR           folder with {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz
                       [/usr/share/datasets/fashion-mnist]
  --epochs N           passes over the training set [5]
  --batch N            images per step, the global batch [64]
  --lr X               AdamW learning rate [2e-3 for cnn, 1e-3 for mlp]
  --bf16               bf16 compute
  --seed N             init and data-order seed [0]
  --save FILE          write the trained weights as .safetensors at the end
  --config_file F      an accelerate config [ACC_CONFIG_FILE, else the default config]
  --threads N          worker threads [all cores]
)";

int run(int argc, char** argv) {
  train::Args args(argc, argv);
  const std::string kind = args.get("model", "cnn");
  const std::string dir = args.get("data", "/usr/share/datasets/fashion-mnist");
  const int64_t epochs = args.get_int("epochs", 5);
  const int64_t batch_size = args.get_int("batch", 64);
  const double lr = args.get_double("lr", kind == "cnn" ? 2e-3 : 1e-3);
  const auto seed = static_cast<uint64_t>(args.get_int("seed", 0));
  const std::string save = args.get("save", "");
  const std::string config_file = args.get("config_file", "");
  const bool bf16 = args.flag("bf16");
  if (const int64_t threads = args.get_int("threads", 0); threads > 0)
    runtime::set_num_threads(static_cast<int>(threads));
  args.finish();
  ACC_CHECK(kind == "cnn" || kind == "mlp", "--model must be cnn or mlp, got '", kind, "'");
  ACC_CHECK(epochs > 0 && batch_size > 0 && lr > 0, "--epochs, --batch and --lr must be positive");
  ACC_CHECK(std::filesystem::is_directory(dir), "no Fashion-MNIST folder ", dir,
            " (run scripts/fetch-data, or pass --data DIR)");

  auto train_set = std::make_shared<data::MnistDataset>(data::MnistDataset::fashion_mnist(true, dir));
  auto test_set = std::make_shared<data::MnistDataset>(data::MnistDataset::fashion_mnist(false, dir));
  auto make_model = [&]() -> std::shared_ptr<models::Model> {
    if (kind == "cnn") return std::make_shared<models::CNNClassifier>(train_set->rows(), 16, 32, 10, seed);
    return std::make_shared<models::MLPClassifier>(train_set->rows() * train_set->cols(), 256, 10, seed);
  };
  auto model = make_model();
  // The accelerate config (--config_file, else ACC_CONFIG_FILE): the whole model is one unit
  // unless the file wraps by size.
  Config config = config_file.empty() ? Config::load() : Config::from_file(config_file);
  if (bf16) config.compute.bf16 = true;
  if (config.dist.fsdp.effective_wrap_policy() == WrapPolicy::TRANSFORMER_BASED_WRAP) {
    config.dist.fsdp.auto_wrap_policy = WrapPolicy::NO_WRAP;
    config.dist.fsdp.wrap_layer_cls.clear();
  }
  const bool main = world().rank() == 0;
  if (main)
    std::printf("train_fashion_mnist: %s, %lld parameters, %lld train / %lld test images, %s on %d ranks\n",
                kind.c_str(), static_cast<long long>(model->num_parameters()),
                static_cast<long long>(train_set->size()), static_cast<long long>(test_set->size()),
                config.strategy_name().c_str(), world().size());

  data::DataLoader all_train(train_set, {.batch_size = batch_size, .shuffle = true, .drop_last = true, .seed = seed});
  auto [sharded, loader] = accelerate(model, all_train, config);
  const data::DataLoader test_loader =
      data::DataLoader(test_set, {.batch_size = 500, .drop_last = world().size() > 1})
          .for_rank(loader.options().rank, loader.options().world);
  optim::AdamW opt(sharded->parameters(), {.lr = lr, .weight_decay = 1e-4});
  const int64_t total_steps = epochs * loader.size();
  optim::LRScheduler schedule(opt, optim::warmup_cosine_lr(lr, lr / 20, loader.size() / 10, total_steps), lr);
  double acc_test = 0;
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    loader.set_epoch(epoch);
    std::optional<train::ProgressBar> bar;  // rank 0's
    if (main) bar.emplace(loader.size(), "epoch " + std::to_string(epoch + 1));
    double running = 0;
    int64_t step = 0;
    for (auto& batch : loader) {
      opt.zero_grad();
      Tensor loss = sharded->forward(batch).loss;
      loss.backward();
      opt.step();
      schedule.step();
      running = step++ == 0 ? loss.item() : 0.98 * running + 0.02 * loss.item();
      if (!bar) continue;
      char postfix[48];
      std::snprintf(postfix, sizeof postfix, "loss=%.4f", running);
      bar->set_postfix(postfix);
      bar->update();
    }
    if (bar) bar->close();
    acc_test = accuracy(*sharded, test_loader);
    if (main) {
      std::printf("epoch %lld: test accuracy %.2f%%\n", static_cast<long long>(epoch + 1), 100 * acc_test);
      std::fflush(stdout);
    }
  }
  if (main) std::printf("final test accuracy (%s): %.2f%%\n", kind.c_str(), 100 * acc_test);
  if (save.empty()) return 0;
  auto trained = make_model();  // the wrapped model's parameters are views of shards now
  sharded->copy_full_parameters_to(*trained);  // a collective: every rank takes part
  if (main) models::save_model(*trained, save);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::printf("%s", kUsage);
      return 0;
    }
  acc::Session session(argc, argv);
  return acc::train::run_program("train_fashion_mnist", [&] { return run(argc, argv); });
}
