// Checkpoints at the world size the test runs on (1, 2 and 4 ranks): a resumed run is the
// uninterrupted run, bit for bit, under every strategy; every kind of damage is one clear
// error on every rank with nothing changed; a failed save keeps the previous checkpoint.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "../fsdp/fsdp_fixtures.h"
#include "../spmd/spmd_fixtures.h"
#include "acc/checkpoint/checkpoint.h"
#include "acc/io/safetensors.h"
#include "acc/models/checkpoint.h"
#include "support/test_support.h"
#include "trainer.h"

namespace acc::test {
namespace {

constexpr int64_t kK = 4;  // steps before and after the save: 8 steps cross an epoch boundary

using Case = std::tuple<std::string, bool, bool>;  // strategy, bf16, FULL_STATE_DICT

class Resume : public ::testing::TestWithParam<Case> {};

// Resuming changes no arithmetic: same world, same strategy, same reductions. So the losses
// and parameters must be identical, not merely close; bf16 too, since the bf16 copies are
// recomputed from the f32 masters exactly as the optimizer writes them. The resumed run may
// take `steps_before` steps of its own first (its optimizer then holds state).
void expect_resume_bit_for_bit(const std::string& kind, const Config& config, int64_t steps_before = 0) {
  SharedTempDir tmp;
  const auto dir = tmp.path() / "step";

  Trainer straight(kind, config);
  const auto all = straight.train(2 * kK, [&](int64_t step) {
    if (step == kK) straight.save(dir);
  });
  Trainer resumed(kind, config, /*seed=*/99);  // another init: the load must replace it all
  resumed.train(steps_before);
  resumed.load(dir);
  EXPECT_EQ(resumed.position().step, kK);
  const auto rest = resumed.train(kK);
  for (int64_t i = 0; i < kK; ++i) EXPECT_EQ(rest[i], all[kK + i]) << "step " << kK + i;
  const auto a = straight.parameters(), b = resumed.parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].second, b[i].second) << a[i].first;
}

TEST_P(Resume, ContinuesBitForBit) {
  const auto& [strategy, bf16, full] = GetParam();
  Config config = strategy_config(strategy, "gpt2", bf16);
  if (full) config.dist.fsdp.state_dict_type = StateDictType::FULL_STATE_DICT;
  expect_resume_bit_for_bit("gpt2", config);
}

// A load into a run that has stepped reads everything once the checks have passed (a resume
// reads its parameters and optimizer state while checking): sharded, and FULL with the Conv1D
// weights turned back from model.safetensors' transposed layout in that second pass.
TEST(Checkpoint, LoadsIntoARunThatHasStepped) {
  for (const bool full : {false, true}) {
    Config config = strategy_config("FULL_SHARD", "gpt2");
    if (full) config.dist.fsdp.state_dict_type = StateDictType::FULL_STATE_DICT;
    SCOPED_TRACE(full ? "FULL_STATE_DICT" : "SHARDED_STATE_DICT");
    expect_resume_bit_for_bit("gpt2", config, 1);
  }
}

// The masters and optimizer state in files (fsdp_offload_dir): saved from the files through a
// buffer, loaded into them through their descriptors (sharded: read while checked; FULL: each
// rank's slices of the model file, checked by whichever rank, read on their own), the bf16
// copies refilled from the masters' files.
TEST(Checkpoint, ResumesWithTheStateInFiles) {
  for (const auto& [full, bf16] : {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}}) {
    Config config = offloading(strategy_config("FULL_SHARD", "gpt2", bf16), memory::Tier::file);
    if (full) config.dist.fsdp.state_dict_type = StateDictType::FULL_STATE_DICT;
    SCOPED_TRACE(std::string(full ? "FULL_STATE_DICT" : "SHARDED_STATE_DICT") + (bf16 ? ", bf16" : ", f32"));
    expect_resume_bit_for_bit("gpt2", config);
  }
}

// A state in files is saved through one buffer of 8 MiB, so that saving a state larger than
// memory holds no more than that beside it: here the token embedding's piece alone is larger
// than the buffer at 1, 2 and 4 ranks (a 64 MiB buffer took it whole).
TEST(Checkpoint, SavesTheStateInFilesThroughOneSmallBuffer) {
  models::GPT2Config c = models::GPT2Config::tiny();
  c.n_embd = 256;
  c.n_layer = 1;
  data::DataLoader loader(make_dataset("gpt2", 8), {.batch_size = 8, .prefetch = 0});
  auto [sharded, rank_loader] = accelerate(std::make_shared<models::GPT2>(c, 0), loader,
                                           offloading(strategy_config("FULL_SHARD", "gpt2"), memory::Tier::file));
  int64_t largest = 0;
  for (const auto& piece : sharded->parameter_pieces()) {
    EXPECT_EQ(piece.master.storage()->tier(), memory::Tier::file) << piece.name;
    largest = std::max(largest, static_cast<int64_t>(piece.master.nbytes()));
  }
  constexpr int64_t kBuffer = int64_t{8} << 20;
  EXPECT_GT(largest, kBuffer);
  SharedTempDir tmp;
  checkpoint::TrainingState state;
  state.model = sharded.get();
  const int64_t live = memory::report()[memory::Category::checkpoint].current;
  memory::reset_peaks();
  checkpoint::save_state(tmp.path() / "step", state);
  // The buffer, counted under Category::checkpoint, and nothing else.
  EXPECT_EQ(memory::report()[memory::Category::checkpoint].peak - live, kBuffer);
}

// SPMD with tensor parallelism (the fsdp-tp rules on (1, 1), (1, 2) or (2, 2)): each rank saves
// the pieces of its slices over `model`; GPT-2 splits its packed q, k, v per section, Llama has
// an untied head. Sharded and FULL_STATE_DICT, f32 and bf16.
using TpCase = std::tuple<std::string, bool, bool>;  // family, bf16, FULL_STATE_DICT
class ResumeTensorParallel : public ::testing::TestWithParam<TpCase> {};

TEST_P(ResumeTensorParallel, ContinuesBitForBit) {
  const auto& [kind, bf16, full] = GetParam();
  Config config = fsdp_tp_config(kind, bf16);
  if (full) config.dist.fsdp.state_dict_type = StateDictType::FULL_STATE_DICT;
  expect_resume_bit_for_bit(kind, config);
}

// The residual stream split on the hidden dim (llama-fsdp-tp-hidden.yaml): the token embedding
// is split by width over `model`. With a vocabulary of 515 the head's slices differ by a row
// between the model ranks, so their flat shards cut the parameters whole over `model` at other
// places and their pieces overlap: each element is saved once, and the run resumes bit for bit.
TEST(Checkpoint, ResumesWithTheHiddenDimSplit) {
  expect_resume_bit_for_bit("llama_odd_vocab",
                            spmd_config("llama_odd_vocab", fsdp_tp_mesh(), "llama-fsdp-tp-hidden.yaml"));
}

INSTANTIATE_TEST_SUITE_P(
    Spmd, ResumeTensorParallel,
    ::testing::Values(TpCase{"gpt2", false, false}, TpCase{"llama", false, false},
                      TpCase{"gpt2", true, false}, TpCase{"llama", false, true}),
    [](const auto& info) {
      return std::get<0>(info.param) + (std::get<1>(info.param) ? "_bf16" : "_f32") +
             (std::get<2>(info.param) ? "_full" : "_sharded");
    });

INSTANTIATE_TEST_SUITE_P(
    Strategies, Resume,
    ::testing::Values(Case{"FULL_SHARD", false, false}, Case{"SHARD_GRAD_OP", false, false},
                      Case{"NO_SHARD", false, false}, Case{"HYBRID_SHARD", false, false},
                      Case{"HYBRID_SHARD_ZERO2", false, false}, Case{"FULL_SHARD", true, false},
                      Case{"FULL_SHARD", false, true}, Case{"NO_SHARD", true, true}),
    [](const auto& info) {
      return std::get<0>(info.param) + (std::get<1>(info.param) ? "_bf16" : "_f32") +
             (std::get<2>(info.param) ? "_full" : "_sharded");
    });

// Saved under one strategy, loaded under another at the same world size: the continuation
// differs from the saving strategy's only in the order of f32 additions (the equivalence
// tests' bound, 1e-5 relative on the losses).
TEST(Checkpoint, LoadsUnderAnotherStrategy) {
  SharedTempDir tmp;
  Trainer straight("gpt2", strategy_config("FULL_SHARD", "gpt2"));
  const auto all = straight.train(2 * kK, [&](int64_t step) {
    if (step == kK) straight.save(tmp.path() / "step");
  });
  for (const char* other : {"NO_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD_ZERO2"}) {
    Trainer resumed("gpt2", strategy_config(other, "gpt2"), 5);
    resumed.load(tmp.path() / "step");
    const auto rest = resumed.train(kK);
    for (int64_t i = 0; i < kK; ++i)
      EXPECT_NEAR(rest[i], all[kK + i], 1e-5 * std::abs(all[kK + i])) << other << " step " << i;
  }
}

// A checkpoint can be named by its step directory, its root or the root's `latest` file.
TEST(Checkpoint, ResolvesARootOrItsLatestFileToTheStepDirectory) {
  const auto root = fresh_dir("resolve");
  std::filesystem::create_directories(root / "step_000002");
  std::ofstream(root / "step_000002" / "manifest.json") << "{}";
  std::ofstream(root / "latest") << "step_000002\n";
  EXPECT_EQ(checkpoint::resolve_checkpoint(root), root / "step_000002");
  EXPECT_EQ(checkpoint::resolve_checkpoint(root / "latest"), root / "step_000002");
  EXPECT_EQ(checkpoint::resolve_checkpoint(root / "step_000002"), root / "step_000002");
  EXPECT_EQ(checkpoint::resolve_checkpoint(root / "nothing"), root / "nothing");  // the reader names it
  std::filesystem::remove_all(root);
}

// Every rank must load the same checkpoint. Ranks that name different ones (a save moving
// `latest` while they resolve it, or nodes that see different files) fail together, saying
// which rank read what, with nothing loaded; copies of one checkpoint under other paths load.
TEST(Checkpoint, RanksThatReadDifferentCheckpointsFail) {
  if (world().size() == 1) GTEST_SKIP() << "needs two ranks or more";
  SharedTempDir tmp;
  const auto first = tmp.path() / "first", second = tmp.path() / "second", copy = tmp.path() / "copy";
  Trainer trainer("gpt2", strategy_config("FULL_SHARD", "gpt2"));
  trainer.train(1);
  trainer.save(first);
  trainer.train(1);
  trainer.save(second);
  if (world().rank() == 0) std::filesystem::copy(first, copy);
  world().barrier();
  const bool odd = world().rank() % 2 == 1;
  Trainer fresh("gpt2", strategy_config("FULL_SHARD", "gpt2"), 3);
  const auto before = fresh.local_values();
  try {
    fresh.load(odd ? second : first);
    ADD_FAILURE() << "the ranks loaded different checkpoints";
  } catch (const Error& e) {
    expect_contains(e.what(), {"nothing was loaded", "rank 1: the ranks read different checkpoints: ",
                               second.string() + " (step 2) here, " + first.string() + " (step 1) on rank 0"});
  }
  EXPECT_TRUE(before == fresh.local_values()) << "a failed load changed the model or the optimizer";
  fresh.load(odd ? copy : first);
  EXPECT_EQ(fresh.position().step, 1);
}

// A `latest` naming a step directory that one rank cannot see (a machine that sees `latest`
// before the directory) is one error on every rank, not a rank missing from the collectives.
TEST(Checkpoint, ALatestThatOneRankCannotFollowFailsOnEveryRank) {
  if (world().size() == 1) GTEST_SKIP() << "needs two ranks or more";
  SharedTempDir tmp;
  Trainer trainer("gpt2", strategy_config("FULL_SHARD", "gpt2"));
  trainer.train(1);
  checkpoint::save_checkpoint(tmp.path() / "seen", trainer.state());
  if (world().rank() == 0) {
    std::filesystem::create_directories(tmp.path() / "unseen");
    std::ofstream(tmp.path() / "unseen" / "latest") << "step_000001\n";
  }
  world().barrier();
  Trainer fresh("gpt2", strategy_config("FULL_SHARD", "gpt2"), 3);
  try {
    fresh.load(tmp.path() / (world().rank() == 1 ? "unseen" : "seen"));
    ADD_FAILURE() << "the load succeeded";
  } catch (const Error& e) {
    expect_contains(e.what(), {"nothing was loaded", "rank 1: " + (tmp.path() / "unseen" / "latest").string() +
                                                         " names step_000001 but"});
  }
}

// merge_weights gives one Hugging Face file (Conv1D weights [in, out]) that models::load_model
// reads back into a plain model equal to the sharded one; bf16 rounds each value once.
// Under tensor parallelism too, where pieces are parts of slices over `model`.
class MergeWeights : public ::testing::TestWithParam<bool> {};  // tensor parallel

TEST_P(MergeWeights, GivesTheWholeModel) {
  SharedTempDir tmp;
  Trainer trainer("gpt2", GetParam() ? fsdp_tp_config("gpt2") : strategy_config("FULL_SHARD", "gpt2"));
  trainer.train(2);
  trainer.save(tmp.path() / "step");
  const auto whole = trainer.parameters();
  if (world().rank() == 0) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      const auto out = tmp.path() / ("merged_" + std::string(dtype_name(dtype)) + ".safetensors");
      checkpoint::merge_weights(tmp.path() / "step", out, dtype);
      auto plain = make_model("gpt2", 123);
      models::load_model(*plain, out);
      const auto loaded = plain->named_parameters();
      ASSERT_EQ(loaded.size(), whole.size());
      for (size_t i = 0; i < whole.size(); ++i) {
        const auto expected = dtype == DType::f32 ? whole[i].second
                                                  : Tensor::from_vector(whole[i].second, {static_cast<int64_t>(whole[i].second.size())})
                                                        .to(DType::bf16).to(DType::f32).to_vector();
        EXPECT_EQ(loaded[i].second.to_vector(), expected) << whole[i].first << " " << dtype_name(dtype);
      }
    }
  }
  world().barrier();
}

INSTANTIATE_TEST_SUITE_P(Checkpoint, MergeWeights, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "TensorParallel" : "FullShard"; });

// Hugging Face's style: what the accelerator prepared and registered is saved and restored.
TEST(Checkpoint, AcceleratorSavesWhatItPrepared) {
  SharedTempDir tmp;
  auto run = [&](uint64_t seed, const std::function<void(Accelerator&, ShardedModel&, optim::AdamW&)>& body) {
    Accelerator accelerator({.config = strategy_config("FULL_SHARD", "gpt2")});
    data::DataLoader all(make_dataset("gpt2", 16), {.batch_size = 8, .prefetch = 0});
    auto [model, loader] = accelerator.prepare(make_model("gpt2", seed), all);
    optim::AdamW opt(model->param_groups(0.1), {.lr = 1e-3});
    accelerator.register_for_checkpointing(&opt);
    body(accelerator, *model, opt);
    std::vector<std::vector<float>> values;
    for (const auto& [_, t] : model->full_parameters()) values.push_back(t.to_vector());
    return values;
  };
  const auto saved = run(0, [&](Accelerator& acc, ShardedModel& model, optim::AdamW& opt) {
    data::DataLoader all(make_dataset("gpt2", 16), {.batch_size = 8, .prefetch = 0});
    for (auto& batch : all.for_rank(world().rank(), world().size())) {
      acc.backward(model.forward(batch).loss);
      opt.step();
      opt.zero_grad();
    }
    acc.save_state(tmp.path() / "acc", {.step = 2, .epoch = 1, .batch = 0});
  });
  const auto loaded = run(7, [&](Accelerator& acc, ShardedModel&, optim::AdamW& opt) {
    const auto at = acc.load_state(tmp.path() / "acc");
    EXPECT_EQ(at.step, 2);
    EXPECT_EQ(at.epoch, 1);
    EXPECT_EQ(opt.steps_taken(), 2);
  });
  EXPECT_EQ(loaded, saved);
}

// --- damage: each is one error naming the problem, on every rank, nothing changed ---

class Damaged : public ::testing::Test {
 protected:
  void SetUp() override {
    trainer_ = std::make_unique<Trainer>("gpt2", strategy_config("FULL_SHARD", "gpt2"));
    trainer_->train(2);
    trainer_->save(dir());
  }
  std::filesystem::path dir() const { return tmp_.path() / "step"; }
  // Runs `damage` on rank 0, then expects loading into a fresh trainer (after `steps` of its
  // own) to fail with `message` on every rank and leave that trainer's parameters and optimizer
  // state as they were: all of it when the damage is found before anything is read, the
  // optimizer state alone when it is found by the checksums of the bytes read and the
  // optimizer had not stepped (a resume reads the parameters in place while it checks).
  void expect_load_fails(const std::function<void()>& damage, const std::string& message,
                         const std::string& kind = "gpt2", int steps = 0, bool found_by_reading = false) {
    if (world().rank() == 0) damage();
    world().barrier();
    Trainer fresh(kind, strategy_config("FULL_SHARD", kind), 3);
    fresh.train(steps);
    const auto before = fresh.local_values();
    const bool in_place = found_by_reading && steps == 0;
    try {
      fresh.load(dir());
      ADD_FAILURE() << "loading succeeded; expected an error containing: " << message;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(in_place ? "the model's parameters are not" : "nothing was loaded"),
                std::string::npos)
          << e.what();
    }
    const auto after = fresh.local_values();
    const size_t params = in_place ? fresh.model().parameter_pieces().size() : 0;
    EXPECT_TRUE(std::equal(before.begin() + params, before.end(), after.begin() + params, after.end()))
        << "a failed load changed the " << (in_place ? "optimizer" : "model or the optimizer");
  }
  // A FULL_STATE_DICT checkpoint of a trainer one step on, over the one SetUp saved.
  void save_full() {
    Config full = strategy_config("FULL_SHARD", "gpt2");
    full.dist.fsdp.state_dict_type = StateDictType::FULL_STATE_DICT;
    Trainer writer("gpt2", full);
    writer.train(1);
    writer.save(dir());
  }
  // One byte of model.safetensors' `entry` altered: its last element's high bytes.
  void alter_full_model(const std::string& entry) const {
    const auto file = dir() / "model.safetensors";
    uint64_t at = 0;
    {
      const io::SafetensorsReader reader(file);
      std::ifstream in(file, std::ios::binary);
      uint64_t header = 0;
      in.read(reinterpret_cast<char*>(&header), sizeof header);
      at = 8 + header + reader.entry(entry).end - 2;
    }
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x40);
    f.seekp(static_cast<std::streamoff>(at));
    f.write(&c, 1);
  }
  std::filesystem::path shard(int rank) const {
    char name[64];
    std::snprintf(name, sizeof name, "shard-%05d-of-%05d.safetensors", rank, world().size());
    return dir() / name;
  }

  SharedTempDir tmp_;
  std::unique_ptr<Trainer> trainer_;
};

TEST_F(Damaged, MissingShard) {
  expect_load_fails([&] { std::filesystem::remove(shard(world().size() - 1)); }, "is missing from");
}

TEST_F(Damaged, TruncatedFile) {
  expect_load_fails([&] { std::filesystem::resize_file(shard(0), std::filesystem::file_size(shard(0)) - 100); },
                    "(truncated or replaced)");
}

TEST_F(Damaged, AlteredByte) {
  expect_load_fails(
      [&] {
        std::fstream f(shard(0), std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(-8, std::ios::end);
        char c = 0;
        f.read(&c, 1);
        c = static_cast<char>(c ^ 0x40);
        f.seekp(-8, std::ios::end);
        f.write(&c, 1);
      },
      "does not match its checksum", "gpt2", 0, true);
  // The optimizer state above had none yet (its tensors are new, read while the files are
  // checked, and the parameters are read in place); here it has some (both read into place
  // after the checks).
  expect_load_fails([] {}, "does not match its checksum", "gpt2", 1, true);
}

// FULL_STATE_DICT's model.safetensors holds each parameter whole, and a resume has every rank
// read (and sum) its own part of the embedding: no rank reads it whole, and the check is those
// parts' sums combined. A byte altered in the part of the last rank fails it.
TEST_F(Damaged, AlteredByteInAnEntryEveryRankReadsAPartOf) {
  save_full();
  expect_load_fails([&] { alter_full_model("transformer.wte.weight"); },
                    "model.safetensors: \"transformer.wte.weight\" does not match its checksum", "gpt2", 0, true);
}

// A Conv1D weight, stored transposed in model.safetensors, of which two ranks need parts (at 2
// and 4 ranks): a resume has each read it in whole stored rows and sum it while checking; a load
// into a stepped optimizer has one rank check it whole, the parts read after. A byte altered in
// it fails both.
TEST_F(Damaged, AlteredByteInATransposedEntry) {
  save_full();
  const std::string message = "model.safetensors: \"transformer.h.0.mlp.c_fc.weight\" does not match its checksum";
  expect_load_fails([&] { alter_full_model("transformer.h.0.mlp.c_fc.weight"); }, message, "gpt2", 0, true);
  expect_load_fails([] {}, message, "gpt2", 1, true);
}

TEST_F(Damaged, AnotherModel) {
  expect_load_fails([] {}, "differs from this Llama", "llama");
}

TEST_F(Damaged, NewerFormat) {
  expect_load_fails(
      [&] {
        const auto path = dir() / "manifest.json";
        std::ifstream in(path);
        std::string text((std::istreambuf_iterator<char>(in)), {});
        const auto at = text.find("\"version\"");
        text.replace(at, text.find(',', at) - at, "\"version\": 99");
        std::ofstream(path) << text;
      },
      "format version 99 was written by a newer acc");
}

TEST_F(Damaged, UnfinishedSave) {
  expect_load_fails([&] { std::filesystem::remove(dir() / "manifest.json"); },
                    "not a checkpoint, or one whose save did not finish");
}

// The error of a save_checkpoint that fails on the last rank (a full disk, simulated).
std::string failed_save_error(const std::filesystem::path& root, Trainer& trainer) {
  const std::string fault = "fail:" + std::to_string(world().size() - 1);
  ::setenv("ACC_TEST_CHECKPOINT_FAULT", fault.c_str(), 1);
  std::string error = "no error";
  try {
    checkpoint::save_checkpoint(root, trainer.state());
  } catch (const Error& e) {
    error = e.what();
  }
  ::unsetenv("ACC_TEST_CHECKPOINT_FAULT");
  return error;
}

// A save that fails on one rank (a full disk, simulated) is an error on every rank; the
// previous checkpoint stays the latest and loads; nothing of the failed one is left. The error
// says what is left: the earlier checkpoint `latest` still names, or that there is none.
TEST(Checkpoint, FailedSaveKeepsThePreviousCheckpoint) {
  SharedTempDir tmp;
  Trainer trainer("gpt2", strategy_config("FULL_SHARD", "gpt2"));
  trainer.train(1);
  const std::string first = failed_save_error(tmp.path(), trainer);
  expect_contains(first, {"No space left on device", "nothing was saved to",
                          "there is no earlier checkpoint in " + tmp.path().string()});
  EXPECT_EQ(first.find("is kept"), std::string::npos) << first;
  checkpoint::save_checkpoint(tmp.path(), trainer.state());
  trainer.train(1);
  expect_contains(failed_save_error(tmp.path(), trainer),
                  {"No space left on device", "latest still names " + (tmp.path() / "step_000001").string()});
  world().barrier();
  const auto latest = checkpoint::latest_checkpoint(tmp.path());
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->filename(), "step_000001");
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "step_000002.tmp"));
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "step_000002"));
  Trainer fresh("gpt2", strategy_config("FULL_SHARD", "gpt2"), 4);
  fresh.load(*latest);
  EXPECT_EQ(fresh.position().step, 1);
}

TEST(Checkpoint, KeepsTheNewestK) {
  SharedTempDir tmp;
  Trainer trainer("gpt2", strategy_config("SHARD_GRAD_OP", "gpt2"));
  trainer.train(4, [&](int64_t) { checkpoint::save_checkpoint(tmp.path(), trainer.state(), 2); });
  world().barrier();
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "step_000002"));
  EXPECT_TRUE(std::filesystem::exists(tmp.path() / "step_000003"));
  EXPECT_EQ(checkpoint::latest_checkpoint(tmp.path())->filename(), "step_000004");
}

}  // namespace
}  // namespace acc::test
