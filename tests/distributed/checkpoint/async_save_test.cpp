// Asynchronous saves at the world size the test runs on (1, 2 and 4 ranks): training with saves
// in the background is the training without saves, bit for bit; a resume from such a save is
// the uninterrupted run; the host copy is counted and given back; a write that fails on the
// background thread is an error at the commit, with the previous checkpoint still the latest.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "../fsdp/fsdp_fixtures.h"
#include "acc/checkpoint/checkpoint.h"
#include "acc/distributed/agreement.h"
#include "acc/estimate/memory_estimate.h"
#include "acc/io/safetensors.h"
#include "acc/memory/allocator.h"
#include "support/test_support.h"
#include "trainer.h"

namespace acc::test {
namespace {

using Case = std::tuple<std::string, bool, bool>;  // strategy, FULL_STATE_DICT, state in files
class AsyncSave : public ::testing::TestWithParam<Case> {};

Config case_config(const Case& c) {
  Config config = strategy_config(std::get<0>(c), "gpt2");
  if (std::get<1>(c)) config.dist.fsdp.state_dict_type = StateDictType::FULL_STATE_DICT;
  // fsdp_offload_dir: the snapshot is copied file to file
  return std::get<2>(c) ? offloading(config, memory::Tier::file) : config;
}

// A save every 2 steps of 8, written while the next steps run: the losses and parameters are
// those of the run that never saved, and the step-4 checkpoint resumes to the same end.
TEST_P(AsyncSave, ChangesNothingAndResumesBitForBit) {
  SharedTempDir tmp;
  const Config config = case_config(GetParam());
  Trainer plain("gpt2", config);
  const auto expected = plain.train(8);

  Trainer saving("gpt2", config);
  const auto losses = saving.train(8, [&](int64_t step) {
    if (step % 2 == 0) checkpoint::save_async(tmp.path(), saving.state());
  });
  EXPECT_EQ(checkpoint::finish_saves()->filename(), "step_000008");
  EXPECT_FALSE(checkpoint::finish_saves().has_value());  // nothing is left in flight
  EXPECT_EQ(losses, expected);
  const auto a = plain.parameters(), b = saving.parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].second, b[i].second) << a[i].first;

  Trainer resumed("gpt2", config, /*seed=*/99);
  resumed.load(tmp.path() / "step_000004");
  EXPECT_EQ(resumed.position().step, 4);
  const auto rest = resumed.train(4);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(rest[i], expected[4 + i]) << "step " << 4 + i;
  const auto c = resumed.parameters();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].second, c[i].second) << a[i].first;
}

INSTANTIATE_TEST_SUITE_P(Strategies, AsyncSave,
                         ::testing::Values(Case{"FULL_SHARD", false, false}, Case{"NO_SHARD", false, false},
                                           Case{"HYBRID_SHARD", false, false}, Case{"FULL_SHARD", true, false},
                                           Case{"FULL_SHARD", false, true}),
                         [](const auto& info) {
                           return std::get<0>(info.param) + (std::get<1>(info.param) ? "_full" : "_sharded") +
                                  (std::get<2>(info.param) ? "_files" : "");
                         });

// `latest` moves only at the commit: while the write may still run, it names the save before.
TEST(AsyncSave, LatestMovesOnlyAtTheCommit) {
  SharedTempDir tmp;
  Trainer trainer("gpt2", strategy_config("FULL_SHARD", "gpt2"));
  trainer.train(1, [&](int64_t) { checkpoint::save_async(tmp.path(), trainer.state()); });
  EXPECT_FALSE(checkpoint::latest_checkpoint(tmp.path()).has_value());
  trainer.train(1, [&](int64_t) { checkpoint::save_async(tmp.path(), trainer.state()); });
  EXPECT_EQ(checkpoint::latest_checkpoint(tmp.path())->filename(), "step_000001");
  checkpoint::finish_saves();
  EXPECT_EQ(checkpoint::latest_checkpoint(tmp.path())->filename(), "step_000002");
}

// The host copy is exactly what this rank writes (its shard file's tensors) and is counted under
// Category::checkpoint until the write ends. Over all ranks it is what accelerate estimate-memory
// --save_async says: 12 bytes per parameter (f32 master and AdamW's two moments), once.
TEST(AsyncSave, CountsTheHostCopyAndGivesItBack) {
  SharedTempDir tmp;
  Trainer trainer("gpt2", strategy_config("SHARD_GRAD_OP", "gpt2"));
  trainer.train(1);
  const auto live_before = memory::report()[memory::Category::checkpoint].current;
  memory::reset_peaks();
  checkpoint::save_async(tmp.path(), trainer.state());
  const auto dir = checkpoint::finish_saves();
  const memory::Usage usage = memory::report()[memory::Category::checkpoint];
  EXPECT_EQ(usage.current, live_before);
  char shard[64];
  std::snprintf(shard, sizeof shard, "shard-%05d-of-%05d.safetensors", world().rank(), world().size());
  int64_t written = 0;  // f32 elements of this rank's shard file, from the safetensors header
  if (std::filesystem::exists(*dir / shard)) {
    const io::SafetensorsReader file(*dir / shard);
    for (const auto& e : file.entries()) written += e.numel();
  }
  EXPECT_GT(written, 0);
  EXPECT_EQ(usage.peak - live_before, written * 4);
  int64_t all_ranks = 0, parameters = 0;
  for (const auto& bytes : dist::all_gather_strings(world(), std::to_string(usage.peak - live_before)))
    all_ranks += std::stoll(bytes);
  for (const auto& [name, shape] : trainer.model().whole_parameter_shapes()) parameters += shape_numel(shape);
  EXPECT_EQ(all_ranks, 12 * parameters);
  estimate::ModelShape shape;
  shape.parameters = parameters;
  EXPECT_EQ(estimate::async_checkpoint_bytes(shape, {.world = world().size()}), 12 * parameters / world().size());
}

// A write that fails on the last rank's background thread (a full disk, simulated) is an error
// on every rank at the commit, naming the rank and what is left; latest still names the save
// before, which loads.
TEST(AsyncSave, AFailedBackgroundWriteKeepsThePreviousCheckpoint) {
  SharedTempDir tmp;
  Trainer trainer("gpt2", strategy_config("FULL_SHARD", "gpt2"));
  trainer.train(1, [&](int64_t) { checkpoint::save_async(tmp.path(), trainer.state()); });
  const std::string fault = "fail:" + std::to_string(world().size() - 1);
  ::setenv("ACC_TEST_CHECKPOINT_FAULT", fault.c_str(), 1);
  trainer.train(1, [&](int64_t) { checkpoint::save_async(tmp.path(), trainer.state()); });
  ::unsetenv("ACC_TEST_CHECKPOINT_FAULT");
  std::string error = "no error";
  try {
    checkpoint::finish_saves();
  } catch (const Error& e) {
    error = e.what();
  }
  expect_contains(error, {"rank " + std::to_string(world().size() - 1), "No space left on device",
                          "latest still names " + (tmp.path() / "step_000001").string()});
  EXPECT_EQ(checkpoint::latest_checkpoint(tmp.path())->filename(), "step_000001");
  world().barrier();
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "step_000002.tmp"));
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "step_000002"));
  Trainer fresh("gpt2", strategy_config("FULL_SHARD", "gpt2"), 4);
  fresh.load(*checkpoint::latest_checkpoint(tmp.path()));
  EXPECT_EQ(fresh.position().step, 1);
}

}  // namespace
}  // namespace acc::test
