// Model-state memory per rank follows the ZeRO formulas (Ψ parameters, N ranks per shard group):
//   between steps (f32)  NO_SHARD 16Ψ, SHARD_GRAD_OP and FULL_SHARD 16Ψ/N
//                        (4 master + 4 gradient + 8 Adam moments, per element held)
//   with bf16            +2 per element held: the bf16 copy the gather sends
//   during a step        FULL_SHARD adds only the gathered root and the units in flight;
//                        SHARD_GRAD_OP holds every unit gathered from forward to backward;
//                        the token embedding (GPT-2's tied head) is never gathered: it stays
//                        split by vocabulary rows (fsdp_vocab_parallel);
//                        gradients never exceed the shard's.
// Counted by the allocator per category on each rank, at 1, 2 and 4 ranks.
#include <gtest/gtest.h>

#include "acc/memory/allocator.h"
#include "fsdp_fixtures.h"

namespace acc::test {
namespace {

using memory::Category;

struct ModelState {
  int64_t parameters = 0, gradients = 0, optimizer = 0;
  int64_t total() const { return parameters + gradients + optimizer; }
};

ModelState current() {
  const auto r = memory::report();
  return {r[Category::parameters].current, r[Category::gradients].current,
          r[Category::optimizer_state].current};
}

ModelState peak() {
  const auto r = memory::report();
  return {r[Category::parameters].peak, r[Category::gradients].peak,
          r[Category::optimizer_state].peak};
}

struct Measured {
  ModelState steady;  // after two steps, between steps
  ModelState peak;    // highest during the second step
  int64_t psi;        // parameters of the model
  int64_t root, block;  // elements of the root unit and of one block
  int64_t vocab;        // of the token embedding, tied to the head
};

Measured measure(ShardingStrategy strategy, bool bf16) {
  const ModelState before = current();
  const Config config = strategy_config(to_string(strategy), "gpt2", bf16);
  auto model = make_model("gpt2");
  Measured m{};
  m.psi = model->num_parameters();
  for (const auto& [name, p] : model->named_parameters()) {
    if (name.starts_with("transformer.h.0.")) m.block += p.numel();
    if (name.starts_with("transformer.wte.")) m.vocab += p.numel();
    else if (!name.starts_with("transformer.h.")) m.root += p.numel();
  }
  data::DataLoader loader(make_dataset("gpt2", 16), {.batch_size = 8, .prefetch = 0});
  auto [sharded, rank_loader] = accelerate(std::move(model), loader, config);
  optim::AdamW opt(sharded->param_groups(kWeightDecay), kAdam);
  int step = 0;
  for (auto& batch : rank_loader) {
    if (step++ == 1) memory::reset_peaks();
    opt.zero_grad();  // set to none: the pass replaces the shards' gradients in place
    sharded->forward(batch).loss.backward();
    sharded->clip_grad_norm(kMaxNorm);
    opt.step();
  }
  const ModelState now = current(), high = peak();
  m.steady = {now.parameters - before.parameters, now.gradients - before.gradients,
              now.optimizer - before.optimizer};
  m.peak = {high.parameters - before.parameters, high.gradients - before.gradients,
            high.optimizer - before.optimizer};
  return m;
}

// Within 5% (padding to 16 elements per rank and unit is far below that).
void expect_near(int64_t measured, double formula, const char* what) {
  EXPECT_NEAR(static_cast<double>(measured), formula, 0.05 * formula)
      << what << ": measured " << measured << " bytes, formula " << formula;
}

class Memory : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(Memory, ModelStateFollowsTheZeroFormulas) {
  const auto& [name, bf16] = GetParam();
  const ShardingStrategy strategy = parse_sharding_strategy(name, "test");
  const Measured m = measure(strategy, bf16);
  const double held = static_cast<double>(m.psi) / shard_ranks(strategy);
  expect_near(m.steady.parameters, (bf16 ? 6.0 : 4.0) * held, "parameters between steps");
  expect_near(m.steady.gradients, 4.0 * held, "gradients between steps");
  expect_near(m.steady.optimizer, 8.0 * held, "optimizer state between steps");

  // During the step: the gathered copies in the compute dtype.
  const double elem = bf16 ? 2.0 : 4.0;
  const bool keeps_all = strategy == ShardingStrategy::SHARD_GRAD_OP ||
                         strategy == ShardingStrategy::HYBRID_SHARD_ZERO2;
  const double gathered =
      shard_ranks(strategy) == 1 ? 0.0
      : keeps_all                ? elem * static_cast<double>(m.psi - m.vocab)
                                 : elem * static_cast<double>(m.root + 2 * m.block);
  EXPECT_LE(m.peak.parameters, m.steady.parameters + gathered * 1.05) << "parameters during a step";
  if (shard_ranks(strategy) > 1 && !keeps_all) {
    // FULL_SHARD holds the root, the unit computing and the one backward prefetch fetched ahead
    // (the default, BACKWARD_PRE), whatever the number of blocks.
    expect_near(m.peak.parameters - m.steady.parameters, gathered, "gathered units during a step");
  }
  // Gradients go from autograd straight into the shards (a gradient sink per parameter): no
  // unit-sized gradient buffer exists at any time.
  EXPECT_EQ(m.peak.gradients, m.steady.gradients) << "gradients during a step";
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<std::string, bool>>& info) {
  return std::get<0>(info.param) + (std::get<1>(info.param) ? "_bf16" : "_f32");
}

INSTANTIATE_TEST_SUITE_P(Fsdp, Memory,
                         ::testing::Combine(::testing::Values("FULL_SHARD", "SHARD_GRAD_OP",
                                                              "NO_SHARD", "HYBRID_SHARD",
                                                              "HYBRID_SHARD_ZERO2"),
                                            ::testing::Bool()),
                         case_name);

}  // namespace
}  // namespace acc::test
