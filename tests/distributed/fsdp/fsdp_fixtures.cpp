#include "fsdp_fixtures.h"

#include <filesystem>

#include "acc/distributed/single_process_group.h"
#include "acc/memory/allocator.h"
#include "acc/plugin/registry.h"
#include "support/test_support.h"

namespace acc::test {

namespace {

constexpr int64_t kVocab = 512, kSeq = 16, kSide = 8;

class TokenWindows final : public data::Dataset {
 public:
  TokenWindows(int64_t n, int64_t vocab, int64_t seq) : n_(n), vocab_(vocab), seq_(seq) {}
  int64_t size() const override { return n_; }
  data::Batch get_batch(std::span<const int64_t> idx, const data::EpochKey&) const override {
    std::vector<int32_t> ids, labels;
    for (int64_t i : idx) {
      auto window = random_ints(seq_ + 1, 1000 + static_cast<uint64_t>(i), 0, static_cast<int32_t>(vocab_));
      ids.insert(ids.end(), window.begin(), window.end() - 1);
      labels.insert(labels.end(), window.begin() + 1, window.end());
    }
    const int64_t b = static_cast<int64_t>(idx.size());
    data::Batch batch;
    batch.set("input_ids", Tensor::from_vector_i32(ids, {b, seq_}));
    batch.set("labels", Tensor::from_vector_i32(labels, {b, seq_}));
    return batch;
  }

 private:
  int64_t n_, vocab_, seq_;
};

class Images final : public data::Dataset {
 public:
  explicit Images(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  data::Batch get_batch(std::span<const int64_t> idx, const data::EpochKey&) const override {
    std::vector<float> pixels;
    std::vector<int32_t> labels;
    for (int64_t i : idx) {
      auto image = random_vector(kSide * kSide, 2000 + static_cast<uint64_t>(i));
      pixels.insert(pixels.end(), image.begin(), image.end());
      labels.push_back(static_cast<int32_t>(i % 10));
    }
    const int64_t b = static_cast<int64_t>(idx.size());
    data::Batch batch;
    batch.set("images", Tensor::from_vector(pixels, {b, 1, kSide, kSide}));
    batch.set("labels", Tensor::from_vector_i32(labels, {b}));
    return batch;
  }

 private:
  int64_t n_;
};

std::vector<optim::ParamGroup> decay_groups(const models::Model& model) {
  optim::ParamGroup decayed, plain;
  decayed.weight_decay = kWeightDecay;
  plain.weight_decay = 0.0;
  for (const auto& [_, p] : model.named_parameters())
    (ShardedModel::decays(p.shape()) ? decayed : plain).params.push_back(p);
  return {decayed, plain};
}

// One training loop for both runs: the user's loop of the facade contract.
template <class Forward, class Clip, class Mean>
RunResult train(data::DataLoader& loader, optim::Optimizer& opt, int64_t steps, Forward forward,
                Clip clip, Mean global_mean) {
  RunResult result;
  for (auto& batch : loader) {
    if (static_cast<int64_t>(result.losses.size()) == steps) break;
    opt.zero_grad();
    Tensor loss = forward(batch).loss;
    loss.backward();
    result.norms.push_back(static_cast<float>(clip(kMaxNorm)));
    opt.step();
    result.losses.push_back(global_mean(loss.item()));
  }
  return result;
}

std::vector<std::pair<std::string, std::vector<float>>> values(
    const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::pair<std::string, std::vector<float>>> out;
  for (const auto& [name, t] : named) out.emplace_back(name, t.to_vector());
  return out;
}

// The user's loop through a sharded model: losses averaged over `group`'s ranks.
RunResult run_sharded(ShardedModel& sharded, data::DataLoader& loader, dist::ProcessGroup& group,
                      int64_t steps) {
  optim::AdamW opt(sharded.param_groups(kWeightDecay), kAdam);
  RunResult result = train(
      loader, opt, steps, [&](const data::Batch& b) { return sharded.forward(b); },
      [&](double max_norm) { return sharded.clip_grad_norm(max_norm); },
      [&](float loss) {
        Tensor t = Tensor::from_vector({loss / static_cast<float>(group.size())}, {1});
        group.all_reduce(t);
        return t.item();
      });
  result.params = values(sharded.full_parameters());
  return result;
}

// `seq` > 0: token windows of that length instead of the family's dataset.
data::DataLoader global_loader(const std::string& kind, int64_t steps, int64_t global_batch, int64_t seq = 0) {
  const int64_t samples = steps * global_batch;
  return data::DataLoader(seq > 0 ? make_token_dataset(samples, kVocab, seq) : make_dataset(kind, samples),
                          {.batch_size = global_batch, .prefetch = 0});
}

}  // namespace

std::shared_ptr<models::Model> make_model(const std::string& kind, uint64_t seed) {
  if (kind == "mlp") return std::make_shared<models::MLPClassifier>(kSide * kSide, 48, 10, seed);
  const int64_t layers = kind.ends_with("_deep") ? 5 : kind.ends_with("_deeper") ? 9 : 2;
  if (kind.starts_with("gpt2")) {
    auto c = models::GPT2Config::tiny();
    c.vocab_size = kVocab;
    c.n_layer = layers;
    c.n_embd = 64;
    c.n_head = 2;
    c.n_positions = kSeq;
    return std::make_shared<models::GPT2>(c, seed);
  }
  ACC_CHECK(kind == "llama" || kind == "llama_odd_vocab" || kind == "llama_deep" || kind == "llama_deeper",
            "make_model: unknown kind ", kind);
  auto c = models::LlamaConfig::tiny();
  c.vocab_size = kind == "llama_odd_vocab" ? kVocab + 3 : kVocab;  // odd: splits over ranks unevenly
  c.num_hidden_layers = layers;
  c.hidden_size = 64;
  c.intermediate_size = 128;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.max_position_embeddings = kSeq;
  return std::make_shared<models::Llama>(c, seed);
}

std::vector<std::string> block_classes(const std::string& kind) {
  if (kind.starts_with("gpt2")) return {"GPT2Block"};
  if (kind.starts_with("llama")) return {"LlamaDecoderLayer"};
  return {};
}

Config strategy_config(const std::string& strategy, const std::string& kind, bool bf16) {
  Config config;
  config.dist.distributed_type = DistributedType::FSDP;
  config.dist.fsdp.sharding_strategy = parse_sharding_strategy(strategy, "test");
  config.dist.fsdp.wrap_layer_cls = block_classes(kind);
  config.compute.bf16 = bf16;
  return config;
}

Config offloading(Config config, memory::Tier tier) {
  config.dist.fsdp.offload_params = tier != memory::Tier::compute;
  if (tier == memory::Tier::file) {
    const auto dir = std::filesystem::temp_directory_path() / "acc-offload-test";
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    config.dist.fsdp.offload_dir = dir.string();
  }
  return config;
}

Config pipeline_config(const std::string& schedule, int microbatches, const std::string& split_points) {
  Config config;
  config.dist.strategy = "PIPELINE";
  auto& section = config.section("pipeline_config");
  section.set("schedule", schedule);
  section.set("microbatches", std::to_string(microbatches));
  section.set("split_points", split_points);
  return config;
}

std::shared_ptr<const data::Dataset> make_dataset(const std::string& kind, int64_t samples) {
  if (kind == "mlp") return std::make_shared<Images>(samples);
  return make_token_dataset(samples, kVocab, kSeq);
}

std::shared_ptr<const data::Dataset> make_token_dataset(int64_t samples, int64_t vocab, int64_t seq) {
  return std::make_shared<TokenWindows>(samples, vocab, seq);
}

RunResult run_accelerated(const std::string& kind, const Config& config, int64_t steps,
                          int64_t global_batch, int64_t seq) {
  auto [sharded, loader] = accelerate(make_model(kind), global_loader(kind, steps, global_batch, seq), config);
  return run_sharded(*sharded, loader, world(), steps);
}

RunResult run_one_rank(const std::string& kind, const Config& config, int64_t steps,
                       int64_t global_batch) {
  Config one = config;
  one.dist.distributed_type = DistributedType::NO;
  auto strategy = plugin::Registry::global().make_strategy(one.strategy_name());
  auto alone = std::make_shared<dist::SingleProcessGroup>();
  strategy->setup(alone, dist::Topology{}, one);
  auto sharded = strategy->wrap(make_model(kind));
  auto loader = global_loader(kind, steps, global_batch);
  return run_sharded(*sharded, loader, *alone, steps);
}

RunResult run_single_process(const std::string& kind, int64_t steps, int64_t global_batch, int64_t seq) {
  auto loader = global_loader(kind, steps, global_batch, seq);
  auto model = make_model(kind);
  optim::AdamW opt(decay_groups(*model), kAdam);
  RunResult result = train(
      loader, opt, steps, [&](const data::Batch& b) { return model->forward(b); },
      [&](double max_norm) { return optim::clip_grad_norm(model->parameters(), max_norm); },
      [](float loss) { return loss; });
  result.params = values(model->named_parameters());
  return result;
}

int shard_ranks(ShardingStrategy s) {
  if (s == ShardingStrategy::NO_SHARD) return 1;
  if (is_hybrid(s)) return std::min(world().size(), 2);
  return world().size();
}

bool splits_vocab(const std::string& kind, const std::string& strategy) {
  return (kind.starts_with("gpt2") || kind.starts_with("llama")) &&
         shard_ranks(parse_sharding_strategy(strategy, "test")) > 1;
}

float f32_param_atol(const std::string& kind, const std::string& strategy) {
  return splits_vocab(kind, strategy) ? 5e-5f : 5e-6f;
}

void expect_same_parameters(const std::vector<std::pair<std::string, Tensor>>& got,
                            const std::vector<std::pair<std::string, Tensor>>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first);
    EXPECT_EQ(got[i].second.shape(), want[i].second.shape()) << want[i].first;
    EXPECT_EQ(got[i].second.to_vector(), want[i].second.to_vector()) << want[i].first;
  }
}

MemoryPeaks measure_step(const std::function<std::shared_ptr<ShardedModel>()>& wrap,
                         const data::DataLoader& loader, int64_t steps) {
  using memory::Category;
  const auto before = memory::report();
  MemoryPeaks p;
  {
    auto sharded = wrap();
    optim::AdamW opt(sharded->param_groups(kWeightDecay), kAdam);
    int64_t step = 0;
    for (auto& batch : loader) {
      if (step == steps) break;
      if (++step == steps) memory::reset_peaks();
      opt.zero_grad();
      sharded->forward(batch).loss.backward();
      sharded->clip_grad_norm(kMaxNorm);
      opt.step();
    }
    const auto r = memory::report();
    auto above = [&](Category c) { return r[c].peak - before[c].current; };
    p = {above(Category::parameters), above(Category::gradients), above(Category::optimizer_state),
         above(Category::activations), above(Category::communication),
         r.total.peak - before.total.current};
  }
  return p;
}

void expect_within(int64_t measured, int64_t estimated, double tolerance, const std::string& what) {
  EXPECT_NEAR(static_cast<double>(estimated), static_cast<double>(measured),
              tolerance * static_cast<double>(measured))
      << what << ": estimated " << estimated << " bytes, measured " << measured;
}

}  // namespace acc::test
