#include "trainer.h"

#include <unistd.h>

#include "../fsdp/fsdp_fixtures.h"
#include "acc/distributed/agreement.h"

namespace acc::test {

namespace {
constexpr int64_t kGlobalBatch = 8, kSamples = 24, kTotalSteps = 12;
}

Trainer::Trainer(const std::string& kind, Config config, uint64_t seed) : config_(std::move(config)) {
  data::DataLoader all(make_dataset(kind, kSamples), {.batch_size = kGlobalBatch, .shuffle = true,
                                                      .drop_last = true, .seed = 7, .prefetch = 0});
  auto [sharded, loader] = accelerate(make_model(kind, seed), all, config_);
  sharded_ = sharded;
  loader_ = std::make_unique<data::DataLoader>(loader);
  opt_ = std::make_unique<optim::AdamW>(sharded_->param_groups(kWeightDecay),
                                        kAdam);
  schedule_ = std::make_unique<optim::LRScheduler>(
      *opt_, optim::warmup_cosine_lr(kLr, kLr / 10, 2, kTotalSteps), kLr);
}

std::vector<float> Trainer::train(int64_t n, const std::function<void(int64_t)>& on_step) {
  std::vector<float> losses;
  loader_->set_epoch(position_.epoch);
  auto it = loader_->begin_at(position_.batch);
  for (int64_t i = 0; i < n; ++i) {
    if (it == loader_->end()) {
      position_.epoch += 1;
      position_.batch = 0;
      loader_->set_epoch(position_.epoch);
      it = loader_->begin();
    }
    opt_->zero_grad();
    Tensor loss = sharded_->forward(*it).loss;
    loss.backward();
    sharded_->clip_grad_norm(kMaxNorm);
    opt_->step();
    schedule_->step();
    ++it;
    ++position_.batch;
    ++position_.step;
    Tensor mean = Tensor::from_vector({loss.item() / static_cast<float>(world().size())}, {1});
    world().all_reduce(mean);
    losses.push_back(mean.item());
    if (on_step) on_step(position_.step);
  }
  return losses;
}

checkpoint::TrainingState Trainer::state() {
  return {sharded_.get(), opt_.get(), schedule_.get(), &config_, position_};
}

void Trainer::load(const std::filesystem::path& dir) {
  auto s = state();
  position_ = checkpoint::load_state(dir, s);
}

std::vector<std::pair<std::string, std::vector<float>>> Trainer::parameters() {
  std::vector<std::pair<std::string, std::vector<float>>> out;
  for (const auto& [name, t] : sharded_->full_parameters()) out.emplace_back(name, t.to_vector());
  return out;
}

std::vector<std::vector<float>> Trainer::local_values() const {
  std::vector<std::vector<float>> out;
  for (const auto& p : sharded_->parameter_pieces()) out.push_back(p.master.to_vector());
  // The optimizer's state too: its tensors, or an empty row for a parameter with none yet.
  for (size_t g = 0; g < opt_->param_groups().size(); ++g) {
    for (size_t i = 0; i < opt_->param_groups()[g].params.size(); ++i) {
      const auto& tensors = opt_->state(g, i).tensors;
      if (tensors.empty()) out.emplace_back();
      for (const Tensor& t : tensors) out.push_back(t.to_vector());
    }
  }
  return out;
}

SharedTempDir::SharedTempDir() {
  std::string mine;
  if (world().rank() == 0) {
    std::string pattern = (std::filesystem::temp_directory_path() / "acc_ckpt_XXXXXX").string();
    ACC_CHECK(::mkdtemp(pattern.data()) != nullptr, "mkdtemp failed");
    mine = pattern;
  }
  path_ = dist::all_gather_strings(world(), mine)[0];
}

SharedTempDir::~SharedTempDir() {
  world().barrier();
  std::error_code ignored;
  if (world().rank() == 0) std::filesystem::remove_all(path_, ignored);
}

}  // namespace acc::test
