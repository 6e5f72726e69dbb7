// Training-loop helpers: progress output off a terminal, option parsing, sampling, unigram
// entropy and generation; the LM program's --save, --init-from and --bf16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "acc/data/token_file.h"
#include "acc/models/checkpoint.h"
#include "acc/models/gpt2.h"
#include "acc/train/cli.h"
#include "acc/train/generate.h"
#include "acc/train/lm_program.h"
#include "acc/train/progress.h"
#include "support/test_support.h"

namespace acc {
namespace {

std::string read_all(std::FILE* f) {
  std::rewind(f);
  std::string s;
  char buf[256];
  while (size_t n = std::fread(buf, 1, sizeof buf, f)) s.append(buf, n);
  return s;
}

TEST(ProgressBar, PlainLinesWhenNotATerminal) {
  std::FILE* f = std::tmpfile();
  {
    train::ProgressBar bar(10, "train", f, 4);
    EXPECT_FALSE(bar.is_terminal());
    for (int i = 0; i < 10; ++i) {
      bar.set_postfix("loss=" + std::to_string(i));
      bar.update();
    }
  }
  const std::string out = read_all(f);
  std::fclose(f);
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  // Lines at 4, 8 and the end (10), nothing more.
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3) << out;
  EXPECT_NE(out.find("train  40%|"), std::string::npos) << out;
  EXPECT_NE(out.find("10/10"), std::string::npos) << out;
  EXPECT_NE(out.find("loss=9]"), std::string::npos) << out;
}

TEST(ProgressBar, ResumedCountStartsWhereTheRunWas) {
  std::FILE* f = std::tmpfile();
  {
    train::ProgressBar bar(10, "train", f, 5);
    bar.resume_at(4);
    for (int i = 0; i < 6; ++i) bar.update();
    EXPECT_EQ(bar.count(), 10);
  }
  const std::string out = read_all(f);
  std::fclose(f);
  EXPECT_NE(out.find(" 5/10 "), std::string::npos) << out;
  EXPECT_NE(out.find("10/10"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << out;
}

TEST(ProgressRange, AdvancesWithTheLoop) {
  std::vector<int> values{1, 2, 3};
  int sum = 0;
  auto wrapped = acc::progress(values, "sum");
  for (int v : wrapped) sum += v;
  EXPECT_EQ(sum, 6);
  EXPECT_EQ(wrapped.bar().count(), 3);
}

TEST(Args, ParsesAndRejectsUnknownOptions) {
  const char* argv[] = {"prog", "--steps", "12", "--lr=0.5", "--bf16", "--config", "tiny"};
  train::Args args(7, const_cast<char**>(argv));
  EXPECT_EQ(args.get_int("steps", 1), 12);
  EXPECT_DOUBLE_EQ(args.get_double("lr", 1), 0.5);
  EXPECT_TRUE(args.flag("bf16"));
  EXPECT_EQ(args.get_int("batch", 8), 8);
  EXPECT_THROW(args.finish(), Error);  // --config was never read
  EXPECT_EQ(args.get("config", ""), "tiny");
  EXPECT_NO_THROW(args.finish());
  const char* bad[] = {"prog", "--steps", "x"};
  train::Args bad_args(3, const_cast<char**>(bad));
  EXPECT_THROW(bad_args.get_int("steps", 1), Error);
}

// '-' and '_' are one character in option names; an unknown option is named as it was typed.
TEST(Args, DashAndUnderscoreAreTheSame) {
  const char* argv[] = {"prog", "--val_every", "5", "--save-every=7", "--typo-opt", "1"};
  train::Args args(6, const_cast<char**>(argv));
  EXPECT_EQ(args.get_int("val-every", 1), 5);
  EXPECT_EQ(args.get_int("save_every", 1), 7);
  EXPECT_TRUE(args.has("typo_opt"));
  try {
    args.finish();
    ADD_FAILURE() << "--typo-opt was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const char* part : {"unknown option --typo-opt (known:", "--val-every", "--save_every"})
      EXPECT_NE(what.find(part), std::string::npos) << what;
  }
}

TEST(Sampling, GreedyTopKAndTemperature) {
  const float logits[5] = {0.f, 3.f, 1.f, 2.9f, -1.f};
  EXPECT_EQ(train::sample_token(logits, 5, 0.0, 0, 0.99), 1);  // greedy
  // top_k 2 keeps {1, 3}: u below their split picks 1, above picks 3, never anything else.
  EXPECT_EQ(train::sample_token(logits, 5, 1.0, 2, 0.0), 1);
  EXPECT_EQ(train::sample_token(logits, 5, 1.0, 2, 0.999), 3);
  const double p1 = 1.0 / (1.0 + std::exp(2.9 - 3.0));
  EXPECT_EQ(train::sample_token(logits, 5, 1.0, 2, p1 - 1e-4), 1);
  EXPECT_EQ(train::sample_token(logits, 5, 1.0, 2, p1 + 1e-4), 3);
}

TEST(UnigramEntropy, MatchesClosedForm) {
  EXPECT_NEAR(train::unigram_entropy(std::vector<int32_t>{1, 2, 3, 4}), std::log(4.0), 1e-12);
  EXPECT_NEAR(train::unigram_entropy(std::vector<int32_t>{7, 7, 7, 9}),
              -(0.75 * std::log(0.75) + 0.25 * std::log(0.25)), 1e-12);
}

TEST(UnigramCrossEntropy, AddOneSmoothingOverTheVocabulary) {
  // Fit {1, 1, 2} over a vocabulary of 4: p(1) = 3/7, p(2) = 2/7, p(0) = p(3) = 1/7.
  const std::vector<int32_t> fit{1, 1, 2}, score{1, 3};
  EXPECT_NEAR(train::unigram_cross_entropy(fit, score, 4), -(std::log(3.0 / 7) + std::log(1.0 / 7)) / 2,
              1e-12);
}

TEST(Generate, ExtendsThePromptReproduciblyAndRestoresMode) {
  models::GPT2Config c;
  c.vocab_size = 29;
  c.n_positions = 6;
  c.n_embd = 8;
  c.n_layer = 1;
  c.n_head = 2;
  models::GPT2 model(c, 1);
  const train::SampleOptions opt{.max_new_tokens = 9, .temperature = 1.0, .top_k = 5, .seed = 4};
  const auto a = train::generate(model, {3, 4}, opt);  // longer than n_positions: windowed
  EXPECT_EQ(a.size(), 11u);
  EXPECT_EQ(a[0], 3);
  for (int32_t t : a) EXPECT_TRUE(t >= 0 && t < 29);
  EXPECT_EQ(train::generate(model, {3, 4}, opt), a);
  EXPECT_TRUE(model.is_training());
  EXPECT_THROW(train::generate(model, {}, opt), Error);
}

}  // namespace
}  // namespace acc

namespace acc {
namespace {

// The LM program end to end on a micro GPT-2 and a synthetic token file: --save writes the
// trained weights, --init-from starts from them (a run at lr ~0 must give them back, not the
// seed's init), and --bf16 trains to a finite loss.
class LmProgram : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::fresh_dir("lm_program");
    std::vector<int32_t> tokens(4000);
    for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7 + i / 13) % 50);
    data::write_token_file(dir_ / "train.bin", tokens);
    data::write_token_file(dir_ / "val.bin", tokens);
    std::ofstream(dir_ / "micro.yaml") << "vocab_size: 50\nn_positions: 16\nn_embd: 16\nn_layer: 2\nn_head: 2\n";
  }

  int run(std::vector<std::string> extra) {
    std::vector<std::string> args = {"train_gpt2", "--config", (dir_ / "micro.yaml").string(),
                                      "--data", dir_.string(), "--batch", "2", "--seq", "8",
                                      "--sample-tokens", "0", "--threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    return train::lm_main(static_cast<int>(argv.size()), argv.data(), "train_gpt2",
                          [](const std::string& config, uint64_t seed) {
                            return std::make_shared<models::GPT2>(
                                models::GPT2Config::from_name_or_file(config), seed);
                          });
  }

  std::unique_ptr<models::GPT2> load(const std::filesystem::path& file) {
    auto model = std::make_unique<models::GPT2>(
        models::GPT2Config::from_name_or_file((dir_ / "micro.yaml").string()));
    models::load_model(*model, file);
    return model;
  }

  std::filesystem::path dir_;
};

float max_abs_difference(const models::Model& a, const models::Model& b) {
  float worst = 0;
  for (const auto& [name, p] : a.named_parameters()) {
    const auto x = p.to_vector(), y = b.parameter(name).to_vector();
    for (size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  }
  return worst;
}

TEST_F(LmProgram, WrapsItsBlocksUnlessTheConfigWrapsBySize) {
  auto first_line = [&](std::vector<std::string> extra) {
    ::testing::internal::CaptureStdout();
    EXPECT_EQ(run(std::move(extra)), 0);
    const std::string out = ::testing::internal::GetCapturedStdout();
    return out.substr(0, out.find('\n'));
  };
  // No config: the model's own block class.
  EXPECT_NE(first_line({"--steps", "1"}).find("TRANSFORMER_BASED_WRAP"), std::string::npos);
  // A size-based config (by min_num_params alone, as accelerate may write it) is kept.
  std::ofstream(dir_ / "size.yaml") << "distributed_type: FSDP\nfsdp_config:\n  fsdp_min_num_params: 1000\n";
  EXPECT_NE(first_line({"--steps", "1", "--config_file", (dir_ / "size.yaml").string()})
                .find("SIZE_BASED_WRAP"),
            std::string::npos);
}

// The classes a config names are the user's: a class the model lacks is an error, not replaced.
TEST_F(LmProgram, KeepsTheWrapClassesTheConfigNames) {
  auto error_of = [&](const std::string& classes) {
    std::ofstream(dir_ / "wrap.yaml") << "distributed_type: FSDP\nfsdp_config:\n"
                                         "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n"
                                         "  fsdp_transformer_layer_cls_to_wrap: " << classes << "\n";
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(run({"--steps", "1", "--config_file", (dir_ / "wrap.yaml").string()}), 1);
    return ::testing::internal::GetCapturedStderr();
  };
  const std::string foo = error_of("FooBlock");
  EXPECT_NE(foo.find("class 'FooBlock' matches no module of GPT2"), std::string::npos) << foo;
  const std::string policy = error_of("TRANSFORMER_BASED_WRAP");
  EXPECT_NE(policy.find("'TRANSFORMER_BASED_WRAP' is a value of fsdp_auto_wrap_policy, not a class"),
            std::string::npos) << policy;
}

// --resume alone continues from DIR/latest, as --help says; with `latest` gone, --resume auto
// takes the newest complete step folder and says so, instead of starting afresh.
TEST_F(LmProgram, ResumeFindsTheCheckpointToContinueFrom) {
  const std::string ckpt = (dir_ / "ckpt").string();
  auto output_of = [&](std::vector<std::string> extra) {
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    EXPECT_EQ(run(std::move(extra)), 0);
    return ::testing::internal::GetCapturedStdout() + ::testing::internal::GetCapturedStderr();
  };
  output_of({"--steps", "4", "--save_every", "2", "--checkpoint_dir", ckpt});
  const std::string bare = output_of({"--steps", "5", "--checkpoint_dir", ckpt, "--resume"});
  EXPECT_NE(bare.find("resumed from " + ckpt + "/step_000004 at step 4"), std::string::npos) << bare;
  std::filesystem::remove(dir_ / "ckpt" / "latest");
  std::filesystem::create_directories(dir_ / "ckpt" / "step_000009");  // a save that never finished
  const std::string lost = output_of({"--steps", "6", "--checkpoint_dir", ckpt, "--resume", "auto"});
  test::expect_contains(lost, {ckpt + "/step_000009: no manifest.json (an unfinished save), skipped",
                         ckpt + "/latest is missing: resuming from the newest complete checkpoint",
                         "resumed from " + ckpt + "/step_000004 at step 4"});
}

TEST_F(LmProgram, SaveThenInitFromResumesTheWeights) {
  ASSERT_EQ(run({"--steps", "5", "--lr", "1e-2", "--save", (dir_ / "a.safetensors").string()}), 0);
  ASSERT_EQ(run({"--steps", "1", "--lr", "1e-12", "--init-from", (dir_ / "a.safetensors").string(),
                 "--save", (dir_ / "b.safetensors").string()}),
            0);
  const auto a = load(dir_ / "a.safetensors"), b = load(dir_ / "b.safetensors");
  EXPECT_LT(max_abs_difference(*a, *b), 1e-6f);
  // Five steps at lr 1e-2 moved the weights far from the seed's init, so b came from a.
  const models::GPT2 fresh(models::GPT2Config::from_name_or_file((dir_ / "micro.yaml").string()));
  EXPECT_GT(max_abs_difference(*a, fresh), 1e-3f);
}

TEST_F(LmProgram, Bf16ComputeTrains) {
  ASSERT_EQ(run({"--steps", "3", "--bf16", "--save", (dir_ / "c.safetensors").string()}), 0);
  for (const auto& [name, p] : load(dir_ / "c.safetensors")->named_parameters())
    for (float v : p.to_vector()) ASSERT_TRUE(std::isfinite(v)) << name;
}

}  // namespace
}  // namespace acc

TEST(LmProgramOutput, ValLossSaysAboveOrBelowTheUnigramModel) {
  EXPECT_EQ(acc::train::describe_val_loss(6.8038, 7.4159), "val loss 6.8038 (unigram 7.4159, 0.61 nats below)");
  // A loss above the baseline is "above", never a negative "below" (10.1631 vs 7.4159 once read
  // "-2.75 nats below").
  EXPECT_EQ(acc::train::describe_val_loss(10.1631, 7.4159), "val loss 10.1631 (unigram 7.4159, 2.75 nats above)");
}
