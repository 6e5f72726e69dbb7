// checkpoint_reshard: one link of the chain "saved at N ranks under one strategy, resumed at M
// under another" (reshard.sh runs FULL_SHARD at 4 -> SHARD_GRAD_OP at 2 -> one process,
// tensor-parallel slices to and from whole pieces, and pipeline stages to and from flat pieces).
//
//   checkpoint_reshard save DIR STRATEGY [full]   k steps, save DIR/ckpt, k more steps; rank 0
//                                                 writes the continuation to DIR/reference.safetensors
//   checkpoint_reshard resume DIR STRATEGY        load DIR/ckpt, k steps, compare with the reference
//
// Another world size changes how the f32 gradients are summed, nothing else: the continuation
// must match within the equivalence tests' bounds (losses 1e-5 relative, parameters 1e-4
// relative + 5e-5 absolute after k Adam steps: at several ranks the vocabulary is split, and
// Adam amplifies the reordered sums of nearly cancelling gradients; see
// tests/distributed/fsdp/fsdp_fixtures.h, f32_param_atol).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "../spmd/spmd_fixtures.h"
#include "acc/io/safetensors.h"
#include "trainer.h"

using namespace acc;

namespace {

constexpr int64_t kK = 4;

// GPT-2 of 5 layers, so that 4 ranks can hold one pipeline stage each.
constexpr const char* kModel = "gpt2_deep";

// STRATEGY: an FSDP sharding strategy; SPMD_TP: GPT-2's fsdp-tp rules on the widest
// tensor-parallel mesh the world allows (slices over `model`); PIPELINE: a stage per rank;
// PIPELINE_GRID: half as many stages, each on 2 replicas sharding its parameters; PIPELINE_TP:
// half as many stages, each split over 2 tensor-parallel ranks.
Config config_for(const std::string& strategy) {
  if (strategy == "SPMD_TP") return test::fsdp_tp_config("gpt2");
  if (strategy == "PIPELINE") return test::pipeline_config("1F1B", 2);
  if (strategy == "PIPELINE_GRID") {
    Config config = test::pipeline_config("1F1B", 2);
    config.section("pipeline_config").set("stages", std::to_string(std::max(1, world().size() / 2)));
    return config;
  }
  if (strategy == "PIPELINE_TP") {
    Config config = test::pipeline_config("1F1B", 2);
    config.section("pipeline_config").set("tensor_parallel", "2");
    return config;
  }
  return test::strategy_config(strategy, kModel);
}

int save(const std::filesystem::path& dir, const std::string& strategy, bool full) {
  Config config = config_for(strategy);
  if (full) config.dist.fsdp.state_dict_type = StateDictType::FULL_STATE_DICT;
  test::Trainer trainer(kModel, config);
  trainer.train(kK);
  trainer.save(dir / "ckpt");
  const auto losses = trainer.train(kK);
  const auto params = trainer.parameters();
  if (world().rank() != 0) return 0;
  std::vector<std::pair<std::string, Tensor>> out{{"losses", Tensor::from_vector(losses, {kK})}};
  for (const auto& [name, values] : params)
    out.emplace_back(name, Tensor::from_vector(values, {static_cast<int64_t>(values.size())}));
  io::save_safetensors(dir / "reference.safetensors", out);
  std::printf("saved at %d ranks under %s\n", world().size(), strategy.c_str());
  return 0;
}

bool close(const std::vector<float>& a, const std::vector<float>& b, float rtol, float atol,
           const std::string& what) {
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::abs(a[i] - b[i]) <= atol + rtol * std::abs(b[i]))) {
      std::fprintf(stderr, "%s[%zu]: resumed %.9g, reference %.9g\n", what.c_str(), i, a[i], b[i]);
      return false;
    }
  return a.size() == b.size();
}

int resume(const std::filesystem::path& dir, const std::string& strategy) {
  test::Trainer trainer(kModel, config_for(strategy), /*seed=*/42);
  trainer.load(dir / "ckpt");
  const auto losses = trainer.train(kK);
  const auto params = trainer.parameters();
  if (world().rank() != 0) return 0;
  const auto ref = io::load_safetensors(dir / "reference.safetensors");
  bool ok = close(losses, ref.at("losses").to_vector(), 1e-5f, 0.f, "loss");
  for (const auto& [name, values] : params) ok = close(values, ref.at(name).to_vector(), 1e-4f, 5e-5f, name) && ok;
  std::printf("resumed at %d ranks under %s: %s\n", world().size(), strategy.c_str(),
              ok ? "matches the reference" : "DIFFERS from the reference");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Session session(argc, argv);
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s save|resume DIR STRATEGY [full]\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  return mode == "save" ? save(argv[2], argv[3], argc > 4 && std::string(argv[4]) == "full")
                        : resume(argv[2], argv[3]);
}
