#pragma once
// The checkpoint tests' training run: the facade's loop with AdamW, clipping and a warmup-cosine
// schedule over a small shuffled dataset (3 global batches per epoch, so a resume lands
// mid-epoch), keeping the checkpoint::Position as a real program does.
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../fsdp/fsdp_fixtures.h"
#include "acc/acc.h"

namespace acc::test {

class Trainer {
 public:
  // A fresh model initialised with `seed` under `config` on the world.
  Trainer(const std::string& kind, Config config, uint64_t seed = 0);

  // `n` steps; after each, on_step(step count) may save. Returns the global mean loss per step.
  std::vector<float> train(int64_t n, const std::function<void(int64_t)>& on_step = {});
  checkpoint::TrainingState state();
  void save(const std::filesystem::path& dir) { checkpoint::save_state(dir, state()); }
  void load(const std::filesystem::path& dir);
  // Every parameter whole (a collective), for comparisons.
  std::vector<std::pair<std::string, std::vector<float>>> parameters();
  // This rank's pieces and optimizer state, for "nothing changed" checks.
  std::vector<std::vector<float>> local_values() const;

  ShardedModel& model() { return *sharded_; }
  const checkpoint::Position& position() const { return position_; }

 private:
  Config config_;
  std::shared_ptr<ShardedModel> sharded_;
  std::unique_ptr<data::DataLoader> loader_;
  std::unique_ptr<optim::AdamW> opt_;
  std::unique_ptr<optim::LRScheduler> schedule_;
  checkpoint::Position position_;
};

// A directory every rank of the job names the same (rank 0's choice), removed by the destructor.
class SharedTempDir {
 public:
  SharedTempDir();
  ~SharedTempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace acc::test
