// train_fashion_mnist: a small CNN (or an MLP) on Fashion-MNIST, test accuracy at the end.
//   ./build/bin/train_fashion_mnist --model cnn    (5 epochs; --model mlp for the MLP)
// Data: Debian's dataset-fashion-mnist (scripts/fetch-data installs it), or --data DIR holding
// {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "acc/autograd/grad_mode.h"
#include "acc/data/dataloader.h"
#include "acc/data/idx.h"
#include "acc/models/classifiers.h"
#include "acc/models/checkpoint.h"
#include "acc/optim/optim.h"
#include "acc/runtime/threads.h"
#include "acc/train/cli.h"
#include "acc/train/progress.h"

namespace {

using namespace acc;

// Fraction of the set whose argmax logit is the label.
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
  return total ? static_cast<double>(right) / static_cast<double>(total) : 0.0;
}

int run(int argc, char** argv) {
  train::Args args(argc, argv);
  const std::string kind = args.get("model", "cnn");
  const std::string dir = args.get("data", "/usr/share/datasets/fashion-mnist");
  const int64_t epochs = args.get_int("epochs", 5);
  const int64_t batch_size = args.get_int("batch", 64);
  const double lr = args.get_double("lr", kind == "cnn" ? 2e-3 : 1e-3);
  const auto seed = static_cast<uint64_t>(args.get_int("seed", 0));
  const std::string save = args.get("save", "");
  if (const int64_t threads = args.get_int("threads", 0); threads > 0)
    runtime::set_num_threads(static_cast<int>(threads));
  args.finish();
  ACC_CHECK(kind == "cnn" || kind == "mlp", "--model must be cnn or mlp, got '", kind, "'");
  ACC_CHECK(epochs > 0 && batch_size > 0 && lr > 0, "--epochs, --batch and --lr must be positive");
  ACC_CHECK(std::filesystem::is_directory(dir), "no Fashion-MNIST folder ", dir,
            " (run scripts/fetch-data, or pass --data DIR)");

  auto train_set = std::make_shared<data::MnistDataset>(data::MnistDataset::fashion_mnist(true, dir));
  auto test_set = std::make_shared<data::MnistDataset>(data::MnistDataset::fashion_mnist(false, dir));
  std::shared_ptr<models::Model> model;
  if (kind == "cnn") model = std::make_shared<models::CNNClassifier>(train_set->rows(), 16, 32, 10, seed);
  else model = std::make_shared<models::MLPClassifier>(train_set->rows() * train_set->cols(), 256, 10, seed);
  std::printf("train_fashion_mnist: %s, %lld parameters, %lld train / %lld test images\n",
              kind.c_str(), static_cast<long long>(model->num_parameters()),
              static_cast<long long>(train_set->size()), static_cast<long long>(test_set->size()));

  data::DataLoader loader(train_set, {.batch_size = batch_size, .shuffle = true, .drop_last = true, .seed = seed});
  data::DataLoader test_loader(test_set, {.batch_size = 500});
  optim::AdamW opt(model->parameters(), {.lr = lr, .weight_decay = 1e-4});
  const int64_t total_steps = epochs * loader.size();
  optim::LRScheduler schedule(opt, optim::warmup_cosine_lr(lr, lr / 20, loader.size() / 10, total_steps), lr);
  double acc_test = 0;
  for (int64_t epoch = 0; epoch < epochs; ++epoch) {
    loader.set_epoch(epoch);
    train::ProgressBar bar(loader.size(), "epoch " + std::to_string(epoch + 1));
    double running = 0;
    for (auto& batch : loader) {
      opt.zero_grad();
      Tensor loss = model->forward(batch).loss;
      loss.backward();
      opt.step();
      schedule.step();
      running = bar.count() == 0 ? loss.item() : 0.98 * running + 0.02 * loss.item();
      char postfix[48];
      std::snprintf(postfix, sizeof postfix, "loss=%.4f", running);
      bar.set_postfix(postfix);
      bar.update();
    }
    bar.close();
    acc_test = accuracy(*model, test_loader);
    std::printf("epoch %lld: test accuracy %.2f%%\n", static_cast<long long>(epoch + 1), 100 * acc_test);
    std::fflush(stdout);
  }
  std::printf("final test accuracy (%s): %.2f%%\n", kind.c_str(), 100 * acc_test);
  if (!save.empty()) models::save_model(*model, save);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return acc::train::run_program("train_fashion_mnist", [&] { return run(argc, argv); });
}
