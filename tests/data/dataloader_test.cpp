// DataLoader: batch shapes, drop_last, shuffle determinism by (seed, epoch), rank slices that
// partition each global batch, prefetch equal to synchronous loading, and error surfacing.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "acc/data/dataloader.h"

using acc::Tensor;
using acc::data::Batch;
using acc::data::DataLoader;
using acc::data::EpochKey;
using acc::data::LoaderOptions;

namespace {

// Sample i is the value i (field "index"), plus 1000*epoch + seed in "key" to show the key.
class RangeDataset : public acc::data::Dataset {
 public:
  explicit RangeDataset(int64_t n, int64_t fail_at = -1) : n_(n), fail_at_(fail_at) {}
  int64_t size() const override { return n_; }
  Batch get_batch(std::span<const int64_t> indices, const EpochKey& key) const override {
    acc::data::check_indices(indices, n_, "RangeDataset");
    std::vector<int64_t> idx(indices.begin(), indices.end());
    for (int64_t i : idx)
      if (i == fail_at_) throw acc::Error("RangeDataset: sample " + std::to_string(i) + " is broken");
    std::vector<int64_t> keyed(idx.size(), key.epoch * 1000 + static_cast<int64_t>(key.seed));
    Batch b;
    b.set("index", Tensor::from_vector_i64(idx, {static_cast<int64_t>(idx.size())}));
    b.set("key", Tensor::from_vector_i64(keyed, {static_cast<int64_t>(idx.size())}));
    return b;
  }

 private:
  int64_t n_, fail_at_;
};

std::vector<std::vector<int64_t>> collect(const DataLoader& loader) {
  std::vector<std::vector<int64_t>> out;
  for (auto& batch : loader) out.push_back(batch["index"].to_vector_i64());
  return out;
}

std::vector<int64_t> flatten(const std::vector<std::vector<int64_t>>& batches) {
  std::vector<int64_t> all;
  for (const auto& b : batches) all.insert(all.end(), b.begin(), b.end());
  return all;
}

}  // namespace

TEST(DataLoader, SequentialBatchesAndLastPartialBatch) {
  DataLoader loader(RangeDataset(11), {.batch_size = 4});
  EXPECT_EQ(loader.size(), 3);
  const auto batches = collect(loader);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(batches[2], (std::vector<int64_t>{8, 9, 10}));
}

TEST(DataLoader, DropLastDropsThePartialBatch) {
  DataLoader loader(RangeDataset(11), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(loader.size(), 2);
  const auto batches = collect(loader);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[1], (std::vector<int64_t>{4, 5, 6, 7}));
  DataLoader exact(RangeDataset(8), {.batch_size = 4, .drop_last = true});
  EXPECT_EQ(collect(exact).size(), 2u);
}

TEST(DataLoader, ShuffleIsAPermutationDeterminedBySeedAndEpoch) {
  const LoaderOptions opts{.batch_size = 5, .shuffle = true, .seed = 42};
  DataLoader a(RangeDataset(37), opts), b(RangeDataset(37), opts);
  const auto first = flatten(collect(a));
  EXPECT_EQ(first, flatten(collect(b)));  // same seed and epoch: same order
  EXPECT_EQ(first, flatten(collect(a)));  // a second pass of the same epoch: same order
  auto sorted = first;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(37);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_EQ(sorted, identity);  // every sample exactly once
  EXPECT_NE(first, identity);   // and actually shuffled

  a.set_epoch(1);
  EXPECT_NE(flatten(collect(a)), first);
  DataLoader c(RangeDataset(37), {.batch_size = 5, .shuffle = true, .seed = 43});
  EXPECT_NE(flatten(collect(c)), first);
}

TEST(DataLoader, EpochKeyReachesTheDataset) {
  DataLoader loader(RangeDataset(4), {.batch_size = 2, .seed = 7});
  loader.set_epoch(3);
  for (auto& batch : loader)
    for (int64_t k : batch["key"].to_vector_i64()) EXPECT_EQ(k, 3007);
}

TEST(DataLoader, RankSlicesPartitionEveryGlobalBatch) {
  for (bool drop_last : {false, true}) {
    for (int world : {1, 2, 3, 4}) {
      const LoaderOptions opts{.batch_size = 12, .shuffle = true, .drop_last = drop_last, .seed = 9};
      DataLoader global(RangeDataset(53), opts);
      global.set_epoch(2);
      const auto expected = collect(global);
      std::vector<std::vector<std::vector<int64_t>>> per_rank;
      for (int r = 0; r < world; ++r) {
        DataLoader local = global.for_rank(r, world);
        EXPECT_EQ(local.size(), global.size());
        per_rank.push_back(collect(local));
      }
      for (size_t step = 0; step < expected.size(); ++step) {
        std::vector<int64_t> joined;
        for (int r = 0; r < world; ++r) {
          const auto& part = per_rank[static_cast<size_t>(r)].at(step);
          if (static_cast<int64_t>(expected[step].size()) == 12) {
            EXPECT_EQ(static_cast<int>(part.size()), 12 / world);
          }
          joined.insert(joined.end(), part.begin(), part.end());
        }
        EXPECT_EQ(joined, expected[step]) << "world " << world << " step " << step;
      }
    }
  }
}

// A last batch smaller than the number of ranks leaves some ranks an empty batch, so that
// every rank still takes the same number of steps.
TEST(DataLoader, TinyLastBatchGivesSomeRanksNoRows) {
  DataLoader global(RangeDataset(11), {.batch_size = 8, .world = 1});
  std::vector<int64_t> last;
  for (int r = 0; r < 4; ++r) {
    const auto batches = collect(global.for_rank(r, 4));
    ASSERT_EQ(batches.size(), 2u);
    EXPECT_EQ(batches[0].size(), 2u);
    EXPECT_EQ(batches[1].size(), r == 0 ? 0u : 1u);  // rows [3r/4, 3(r+1)/4) of 3
    last.insert(last.end(), batches[1].begin(), batches[1].end());
  }
  EXPECT_EQ(last, (std::vector<int64_t>{8, 9, 10}));
}

TEST(DataLoader, PrefetchDeliversTheSameBatchesAsSynchronousLoading) {
  for (int prefetch : {1, 2, 5}) {
    DataLoader sync(RangeDataset(29), {.batch_size = 4, .shuffle = true, .seed = 1, .prefetch = 0});
    DataLoader async(RangeDataset(29), {.batch_size = 4, .shuffle = true, .seed = 1, .prefetch = prefetch});
    EXPECT_EQ(collect(sync), collect(async)) << "prefetch " << prefetch;
  }
}

TEST(DataLoader, ProducerErrorsSurfaceInTheLoop) {
  for (int prefetch : {0, 2}) {
    DataLoader loader(RangeDataset(20, /*fail_at=*/9), {.batch_size = 4, .prefetch = prefetch});
    int seen = 0;
    try {
      for (auto& batch : loader) {
        (void)batch;
        ++seen;
      }
      FAIL() << "no error reached the loop";
    } catch (const acc::Error& e) {
      EXPECT_NE(std::string(e.what()).find("sample 9 is broken"), std::string::npos) << e.what();
    }
    EXPECT_EQ(seen, 2) << "batches before the broken one are delivered first";
  }
}

// Leaving the loop early must stop the producer thread without hanging, even when it is blocked
// on a full queue.
TEST(DataLoader, BreakingOutOfTheLoopShutsDownCleanly) {
  DataLoader loader(RangeDataset(1000), {.batch_size = 2, .prefetch = 2});
  for (int rep = 0; rep < 20; ++rep) {
    int n = 0;
    for (auto& batch : loader) {
      (void)batch;
      if (++n == 3) break;
    }
    EXPECT_EQ(n, 3);
  }
  {
    auto started = loader.begin();  // started and abandoned without consuming
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_FALSE(started == loader.end());
  }
}

TEST(DataLoader, BadOptionsNameTheProblem) {
  auto message = [](LoaderOptions o) {
    try {
      DataLoader loader(RangeDataset(8), o);
    } catch (const acc::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({.batch_size = 6, .world = 4}).find("does not divide evenly over 4 ranks"),
            std::string::npos);
  EXPECT_NE(message({.batch_size = 0}).find("batch_size must be >= 1"), std::string::npos);
  EXPECT_NE(message({.batch_size = 4, .rank = 2, .world = 2}).find("rank 2 is outside [0, 2)"),
            std::string::npos);
  DataLoader ok(RangeDataset(8), {.batch_size = 4});
  EXPECT_THROW(ok.for_rank(0, 3), acc::Error);
  Batch empty;
  EXPECT_THROW(empty["input_ids"], acc::Error);
}
