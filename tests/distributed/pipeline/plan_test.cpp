// The PIPELINE strategy's plan, without any rank: stages cut from a model's chain (balanced,
// or at the user's split points, with errors naming the key) and the schedules' order of
// microbatch forwards and backwards (how many activations each stage holds at once).
#include <gtest/gtest.h>

#include <bit>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <random>

#include "acc/models/gpt2.h"
#include "acc/nn/deferred_init.h"
#include "pipeline/schedule.h"
#include "pipeline/stages.h"
#include "../fsdp/fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::pipeline {
namespace {

using Layers = std::vector<std::pair<int64_t, int64_t>>;

TEST(PlanStages, BalancesTheLargestStage) {
  EXPECT_EQ(plan_stages({1, 1, 1, 1}, 0, 0, 2).units, (Layers{{0, 2}, {2, 4}}));
  EXPECT_EQ(plan_stages({1, 1, 1, 1, 1}, 0, 0, 1).units, (Layers{{0, 5}}));
  EXPECT_EQ(plan_stages({1, 1, 1, 1, 1}, 0, 0, 5).units, (Layers{{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}}));
  // The head costs as much as a layer: the last stage takes one layer fewer.
  EXPECT_EQ(plan_stages({2, 2, 2, 2, 2}, 0, 2, 2).units, (Layers{{0, 3}, {3, 5}}));
  // The largest stage cost is the least possible: 5 layers of 2 and a head of 4 on 3 stages.
  const StagePlan plan = plan_stages({2, 2, 2, 2, 2}, 0, 4, 3);
  EXPECT_EQ(plan.units, (Layers{{0, 2}, {2, 4}, {4, 5}}));
  EXPECT_EQ(plan.stage_of_unit(3), 1);
}

TEST(PlanStages, SplitAtTheUsersLayers) {
  EXPECT_EQ(plan_stages({1, 1, 1, 1, 1}, 0, 0, 3, {1, 4}).units, (Layers{{0, 1}, {1, 4}, {4, 5}}));
}

std::vector<std::pair<std::string, int64_t>> sizes(const models::Model& model) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& [name, p] : model.named_parameters()) out.emplace_back(name, p.numel());
  return out;
}

TEST(PlanModelStages, GPT2HoldsItsTiedHeadOnTheFirstAndLastStage) {
  const auto model = test::make_model("gpt2_deep");
  const auto chain = model->structure().chain;
  const StagePlan plan = plan_model_stages(chain, sizes(*model), "transformer.wte.weight", 2, {"auto"});
  ASSERT_EQ(plan.stages(), 2);
  EXPECT_EQ(plan.units[0].second, plan.units[1].first);
  const auto held = holders(chain, plan, sizes(*model));
  EXPECT_EQ(held.at("transformer.wte.weight"), (std::vector<int>{0, 1}));
  EXPECT_EQ(held.at("transformer.wpe.weight"), (std::vector<int>{0}));
  EXPECT_EQ(held.at("transformer.ln_f.weight"), (std::vector<int>{1}));
  EXPECT_EQ(held.at("transformer.h.4.mlp.c_fc.weight"), (std::vector<int>{1}));
  EXPECT_EQ(held.at("transformer.h.0.attn.c_attn.bias"), (std::vector<int>{0}));
  // Named split points: stage 1 begins at layer 1, stage 2 at layer 3.
  const StagePlan named =
      plan_model_stages(chain, sizes(*model), "transformer.wte.weight", 3, {"transformer.h.1", "transformer.h.3"});
  EXPECT_EQ(named.units, (Layers{{0, 1}, {1, 3}, {3, 5}}));
}

// GPT-2 small (12 layers, its 38.6M-parameter head on the last stage) over 2 stages: by
// parameters alone 9 + 3 layers; with each layer's attention counted at 1024 tokens (2 T C =
// 1.6M more a layer) 8 + 4, which measured 1.12x apart a microbatch against 9 + 3's 1.44x
// (GPT-2 small bf16, 8 x 512, 2 ranks, Xeon AMX, 2026-11-27) and 6% more tokens/s.
TEST(PlanModelStages, CountsEachLayersAttention) {
  nn::DeferredInit no_memory;
  models::GPT2 gpt2(models::GPT2Config::small());
  const ChainParameters parameters = chain_parameters(gpt2);
  EXPECT_EQ(parameters.layer_attention, 2 * 1024 * 768);
  EXPECT_EQ(plan_model_stages(parameters.chain, parameters.sizes, parameters.head, 2, {"auto"}).units,
            (Layers{{0, 9}, {9, 12}}));
  EXPECT_EQ(plan_model_stages(parameters, 2, {"auto"}).units, (Layers{{0, 8}, {8, 12}}));
}

// Each virtual stage's times with the cost the planner balances (stage_costs) as its forward
// and twice that as its backward.
std::vector<StageTimes> stage_times(const ChainParameters& parameters, const StagePlan& plan) {
  std::vector<StageTimes> times;
  for (const int64_t c : stage_costs(parameters, plan))
    times.push_back({.forward = static_cast<double>(c), .backward = 2.0 * static_cast<double>(c)});
  return times;
}

// Interleaved 1F1B on 2 ranks of GPT-2 small (4 virtual stages, rank 0 runs stages 0 and 2): a
// rank's work is the sum of its stages. Balancing only the largest stage (the last: a layer and
// the head, which costs 4.5 layers) left rank 0 with 7 layers and rank 1 with 5 and the head
// (measured: 2% and 23% idle, formula 5.9%); balancing the ranks gives rank 0 8 layers and rank
// 1 4 and the head. Run through the schedule at these costs, 8 microbatches: a step 7.6% shorter
// and each rank idle less than under 1F1B (the best of all 165 plans here is as short).
TEST(PlanModelStages, InterleavedBalancesEachRanksStages) {
  nn::DeferredInit no_memory;
  models::GPT2 gpt2(models::GPT2Config::small());
  const ChainParameters parameters = chain_parameters(gpt2);
  const StagePlan by_stage = plan_model_stages(parameters, 4, {"auto"});
  const StagePlan by_rank = plan_model_stages(parameters, 4, {"auto"}, 2);
  EXPECT_EQ(by_stage.units, (Layers{{0, 3}, {3, 7}, {7, 11}, {11, 12}}));
  EXPECT_EQ(by_rank.units, (Layers{{0, 3}, {3, 6}, {6, 11}, {11, 12}}));
  // A stage per rank: unchanged (8 + 4).
  EXPECT_EQ(plan_model_stages(parameters, 2, {"auto"}, 2).units, (Layers{{0, 8}, {8, 12}}));
  const auto simulated = [&](const StagePlan& plan) {
    const int chunks = plan.stages() / 2;
    return simulate(chunks > 1 ? Schedule::interleaved_1f1b : Schedule::one_f_one_b, 2, 8, chunks,
                    stage_times(parameters, plan));
  };
  const Simulation before = simulated(by_stage), after = simulated(by_rank),
                   one_f_one_b = simulated(plan_model_stages(parameters, 2, {"auto"}, 2));
  EXPECT_GT(std::ranges::max(before.rank_idle_share), 0.25);  // rank 0 waits for rank 1
  EXPECT_LT(after.step, 0.95 * before.step);
  EXPECT_LT(after.idle_share, one_f_one_b.idle_share);
  for (int r = 0; r < 2; ++r) EXPECT_LT(after.rank_idle_share[r], one_f_one_b.rank_idle_share[r]) << "rank " << r;
}

// On small random chains the plan is the one brute force picks among every plan of contiguous
// stages: the least (busiest rank's sum, largest stage), and of those the earliest cuts.
TEST(PlanStages, BalancesTheRanksAsWellAsAnyPlan) {
  std::mt19937 random(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 6 + trial % 5, stages = 4 + trial % 3, ranks = trial % 2 ? 2 : 3;
    if (stages > n || stages <= ranks) continue;
    std::vector<int64_t> costs(static_cast<size_t>(n));
    for (auto& c : costs) c = 1 + static_cast<int64_t>(random() % (trial % 4 ? 10 : 2));  // ties too
    const int64_t last = static_cast<int64_t>(random() % 30);
    auto score = [&](const Layers& units) {
      std::vector<int64_t> sum(static_cast<size_t>(ranks), 0);
      int64_t largest = 0;
      for (size_t s = 0; s < units.size(); ++s) {
        int64_t stage = s + 1 == units.size() ? last : 0;
        for (int64_t i = units[s].first; i < units[s].second; ++i) stage += costs[static_cast<size_t>(i)];
        sum[s % static_cast<size_t>(ranks)] += stage;
        largest = std::max(largest, stage);
      }
      return std::pair{std::ranges::max(sum), largest};
    };
    // Every choice of stages - 1 cuts among the n - 1 places between units.
    std::optional<Layers> best;
    for (uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {
      if (std::popcount(mask) != stages - 1) continue;
      Layers units;
      int64_t begin = 0;
      for (int64_t at = 1; at < n; ++at)
        if (mask >> (at - 1) & 1u) units.emplace_back(std::exchange(begin, at), at);
      units.emplace_back(begin, n);
      if (!best || score(units) < score(*best) || (score(units) == score(*best) && units < *best)) best = units;
    }
    EXPECT_EQ(plan_stages(costs, 0, last, stages, {}, ranks).units, *best)
        << "trial " << trial << ": " << n << " units, " << stages << " stages, " << ranks << " ranks";
  }
}

TEST(PlanModelStages, ErrorsNameTheKey) {
  const auto model = test::make_model("llama");  // 2 layers
  const auto chain = model->structure().chain;
  const auto named = sizes(*model);
  test::expect_contains(test::error_of([&] { plan_model_stages(chain, named, "lm_head.weight", 4, {"auto"}); }),
                        {"4 stages", "pipeline_config.stages", "stages_per_rank", "only 2 layers", "model.layers.0 ... model.layers.1"});
  test::expect_contains(test::error_of([&] { plan_model_stages(chain, named, "lm_head.weight", 2, {"model.norm"}); }),
                        {"pipeline_config.split_points", "'model.norm' is no layer"});
  test::expect_contains(test::error_of([&] {
                          plan_model_stages(chain, named, "lm_head.weight", 2, {"model.layers.0", "model.layers.1"});
                        }),
                        {"pipeline_config.split_points", "2 stages need 1 split points", "got 2"});
  test::expect_contains(test::error_of([&] { plan_model_stages(chain, named, "lm_head.weight", 2, {"model.layers.0"}); }),
                        {"pipeline_config.split_points", "'model.layers.0' must come after the first layer"});
}

// A split point may name a module of a layer's residual branch (GPT-2: {ln_1, attn} and
// {ln_2, mlp}): the chain is then cut by branches, the layer's attention on one stage and its
// MLP on the next, each branch's parameters with it. GPT-2 small's 8 + 4 layers moved by half a
// layer: 7.5 + 4.5.
TEST(PlanModelStages, SplitPointsMayCutALayerBetweenItsBranches) {
  nn::DeferredInit no_memory;
  models::GPT2 gpt2(models::GPT2Config::small());
  const ChainParameters parameters = chain_parameters(gpt2);
  for (const char* mlp : {"transformer.h.7.mlp", "transformer.h.7.ln_2"}) {
    const StagePlan plan = plan_model_stages(parameters, 2, {mlp});
    EXPECT_EQ(plan.parts, 2);
    EXPECT_EQ(plan.units, (Layers{{0, 15}, {15, 24}})) << mlp;
    EXPECT_EQ(describe(parameters.chain, plan),
              "0: transformer.h.0.attn .. transformer.h.7.attn; 1: transformer.h.7.mlp .. transformer.h.11.mlp");
    const auto held = holders(parameters.chain, plan, parameters.sizes);
    EXPECT_EQ(held.at("transformer.h.7.ln_1.weight"), (std::vector<int>{0}));
    EXPECT_EQ(held.at("transformer.h.7.attn.c_proj.weight"), (std::vector<int>{0}));
    EXPECT_EQ(held.at("transformer.h.7.ln_2.bias"), (std::vector<int>{1}));
    EXPECT_EQ(held.at("transformer.h.7.mlp.c_fc.weight"), (std::vector<int>{1}));
    EXPECT_EQ(held.at("transformer.wte.weight"), (std::vector<int>{0, 1}));
  }
  // A layer's first branch begins where the layer does; whole layers stay whole.
  EXPECT_EQ(plan_model_stages(parameters, 2, {"transformer.h.7.attn"}).units, (Layers{{0, 14}, {14, 24}}));
  EXPECT_EQ(describe(parameters.chain, plan_model_stages(parameters, 2, {"transformer.h.7"})),
            "0: transformer.h.0 .. transformer.h.6; 1: transformer.h.7 .. transformer.h.11");
  test::expect_contains(test::error_of([&] { plan_model_stages(parameters, 2, {"transformer.h.7.mlp.c_fc"}); }),
                        {"pipeline_config.split_points", "'transformer.h.7.mlp.c_fc' is no layer",
                         "nor a module of a layer's branches (transformer.h.0.mlp)"});
  // By branches, more stages than layers: 4 stages of a 2-layer Llama.
  const auto llama = test::make_model("llama");
  const ChainParameters small = chain_parameters(dynamic_cast<models::CausalLM&>(*llama));
  EXPECT_EQ(plan_model_stages(small, 4, {"model.layers.0.mlp", "model.layers.1", "model.layers.1.mlp"}).units,
            (Layers{{0, 1}, {1, 2}, {2, 3}, {3, 4}}));
}

// A plan by branches runs what the layers run: each branch x + branch(x), in order, gives the
// layer's output bit for bit (GPT-2's and Llama's declared branches match their forwards).
TEST(PlanModelStages, BranchesComputeTheirLayer) {
  for (const char* name : {"gpt2", "llama"}) {
    const auto model = test::make_model(name);
    auto& lm = dynamic_cast<models::CausalLM&>(*model);
    const auto chain = lm.structure().chain;
    ASSERT_EQ(chain.branches.size(), 2u) << name;
    const StagePlan plan{.units = {{0, static_cast<int64_t>(2 * chain.layers.size())}}, .parts = 2};
    const Tensor x = Tensor::randn({2, 8, lm.head_weight().size(1)}, 7, "x");
    Tensor whole = x, by_branch = x;
    for (size_t i = 0; i < chain.layers.size(); ++i) whole = lm.layers()[i](whole);
    for (int64_t u = 0; u < plan.units[0].second; ++u) by_branch = run_unit(lm, chain, plan, u, by_branch);
    EXPECT_EQ(by_branch.to_vector(), whole.to_vector()) << name << ": branches against layers";
  }
}

using K = Action::Kind;

// Every microbatch's forward comes before its backward, each once.
void expect_complete(const std::vector<Action>& actions, int microbatches) {
  std::vector<int> state(static_cast<size_t>(microbatches), 0);
  for (const Action& a : actions) {
    int& s = state[static_cast<size_t>(a.microbatch)];
    EXPECT_EQ(s, a.kind == K::forward ? 0 : 1) << "microbatch " << a.microbatch;
    ++s;
  }
  for (int s : state) EXPECT_EQ(s, 2);
}

TEST(Schedules, GPipeRunsEveryForwardFirstAndHoldsAllMicrobatches) {
  const auto actions = stage_actions(Schedule::gpipe, 1, 4, 8);
  expect_complete(actions, 8);
  EXPECT_EQ(actions.front(), (Action{K::forward, 0}));
  EXPECT_EQ(actions[8], (Action{K::backward, 0}));
  EXPECT_EQ(peak_in_flight(actions), 8);
}

TEST(Schedules, OneFOneBHoldsAtMostTheStagesAfterIt) {
  for (int p : {1, 2, 4})
    for (int m : {1, 3, 8})
      for (int s = 0; s < p; ++s) {
        const auto actions = stage_actions(Schedule::one_f_one_b, s, p, m);
        expect_complete(actions, m);
        EXPECT_EQ(peak_in_flight(actions), std::min(p - s, m)) << "stage " << s << " of " << p << ", m " << m;
      }
  // Stage 0 of 2 with 4 microbatches: one ahead, then alternating, then the last backward.
  EXPECT_EQ(stage_actions(Schedule::one_f_one_b, 0, 2, 4),
            (std::vector<Action>{{K::forward, 0}, {K::forward, 1}, {K::backward, 0}, {K::forward, 2}, {K::backward, 1},
                                 {K::forward, 3}, {K::backward, 2}, {K::backward, 3}}));
}

// Every (kind, stage, microbatch) once per virtual stage of the rank, each forward before its
// backward.
void expect_complete_chunks(const std::vector<Action>& actions, int microbatches, int chunks) {
  std::map<std::pair<int, int>, int> state;
  for (const Action& a : actions) {
    int& s = state[{a.chunk, a.microbatch}];
    EXPECT_EQ(s, a.kind == K::forward ? 0 : 1) << "chunk " << a.chunk << " microbatch " << a.microbatch;
    ++s;
  }
  EXPECT_EQ(state.size(), static_cast<size_t>(microbatches * chunks));
  for (const auto& [_, s] : state) EXPECT_EQ(s, 2);
}

// Unit-time runs of every rank's order (forward 1, backward 2): no order deadlocks, GPipe's and
// 1F1B's idle share is the formula (p - 1) / (m + p - 1) exactly, and interleaving v chunks
// per rank shrinks it to (p - 1) / (v m + p - 1).
TEST(Schedules, SimulatedBubblesMatchTheFormulaAndInterleavingShrinksThem) {
  for (int p : {2, 4})
    for (int m : {4, 8}) {
      const double formula = static_cast<double>(p - 1) / (m + p - 1);
      EXPECT_NEAR(simulate(Schedule::gpipe, p, m).idle_share, formula, 1e-12) << p << " ranks, " << m;
      EXPECT_NEAR(simulate(Schedule::one_f_one_b, p, m).idle_share, formula, 1e-12) << p << " ranks, " << m;
      for (int v : {2, 3}) {
        for (int r = 0; r < p; ++r) expect_complete_chunks(stage_actions(Schedule::interleaved_1f1b, r, p, m, v), m, v);
        EXPECT_NEAR(simulate(Schedule::interleaved_1f1b, p, m, v).idle_share,
                    static_cast<double>(p - 1) / (v * m + p - 1), 1e-12)
            << p << " ranks, " << m << " microbatches, " << v << " chunks";
      }
    }
}

// Stages of unequal times: 1F1B on 2 stages whose second is the slower (forward 1.5, backward
// 3 against 1 and 2) takes F0 + m (F1 + B1) + B0, and each rank idles that less its own work:
// the faster rank m (S1 - S0) + F0 + B0 (S = F + B), the slower one F0 + B0.
TEST(Schedules, SimulatedUnequalStagesIdleByTheirDifference) {
  const int m = 8;
  const Simulation s = simulate(Schedule::one_f_one_b, 2, m, 1, {{1, 2, 0}, {1.5, 3, 0}});
  EXPECT_DOUBLE_EQ(s.step, 1 + m * 4.5 + 2);
  EXPECT_DOUBLE_EQ(s.rank_idle_share[0], 1 - m * 3 / s.step);
  EXPECT_DOUBLE_EQ(s.rank_idle_share[1], 1 - m * 4.5 / s.step);
  // Equal times give the formula on every rank.
  const Simulation even = simulate(Schedule::one_f_one_b, 2, m, 1, {{1, 2, 0}, {1, 2, 0}});
  for (double idle : even.rank_idle_share) EXPECT_NEAR(idle, 1.0 / (m + 1), 1e-12);
}

// Zero bubble: each microbatch's forward, its backward (the input's gradient) and its weight
// part once, in that order; at most p microbatches between forward and weight part on any rank
// (1F1B's most, on its first rank), and no more than 1F1B's between forward and backward; the
// idle share of unit-time runs (F, B and W 1 each) is (p - 1) / (3 m + p - 1) for m >= p, a
// third of 1F1B's with the same total work.
TEST(Schedules, ZeroBubbleFillsTheWaitsWithWeightGradients) {
  for (int p : {1, 2, 3, 4})
    for (int m : {1, 2, 4, 8}) {
      for (int r = 0; r < p; ++r) {
        const auto actions = stage_actions(Schedule::zero_bubble, r, p, m);
        std::vector<int> state(static_cast<size_t>(m), 0);
        int before_backward = 0, most_before_backward = 0;
        for (const Action& a : actions) {
          int& s = state[static_cast<size_t>(a.microbatch)];
          EXPECT_EQ(s, static_cast<int>(a.kind)) << "rank " << r << " microbatch " << a.microbatch;
          ++s;
          before_backward += a.kind == K::forward ? 1 : a.kind == K::backward ? -1 : 0;
          most_before_backward = std::max(most_before_backward, before_backward);
        }
        for (int s : state) EXPECT_EQ(s, 3);
        EXPECT_LE(peak_in_flight(actions), std::min(p, m)) << "rank " << r << " of " << p << ", m " << m;
        EXPECT_EQ(most_before_backward, std::min(p - r, m)) << "rank " << r << " of " << p << ", m " << m;
      }
      const double idle = simulate(Schedule::zero_bubble, p, m).idle_share;
      if (m >= p) {
        EXPECT_NEAR(idle, static_cast<double>(p - 1) / (3 * m + p - 1), 1e-12) << p << " ranks, " << m;
      }
      EXPECT_LE(idle, simulate(Schedule::one_f_one_b, p, m).idle_share + 1e-12) << p << " ranks, " << m;
    }
  // The last of 2 ranks with 4 microbatches: a weight part right after each backward but the
  // first, which waits for a second one.
  EXPECT_EQ(stage_actions(Schedule::zero_bubble, 1, 2, 4),
            (std::vector<Action>{{K::forward, 0}, {K::backward, 0}, {K::forward, 1}, {K::backward, 1}, {K::weight, 0},
                                 {K::forward, 2}, {K::backward, 2}, {K::weight, 1}, {K::forward, 3}, {K::backward, 3},
                                 {K::weight, 2}, {K::weight, 3}}));
}

TEST(Schedules, NamesAndShapesAreChecked) {
  EXPECT_EQ(parse_schedule("gpipe"), Schedule::gpipe);
  EXPECT_EQ(parse_schedule("1f1b"), Schedule::one_f_one_b);
  EXPECT_EQ(parse_schedule("Interleaved_1F1B"), Schedule::interleaved_1f1b);
  EXPECT_EQ(parse_schedule("Zero_Bubble"), Schedule::zero_bubble);
  test::expect_contains(test::error_of([] { parse_schedule("zigzag"); }),
                        {"pipeline_config.schedule", "'zigzag'", "GPipe, 1F1B, interleaved_1F1B or zero_bubble"});
  test::expect_contains(test::error_of([] { stage_actions(Schedule::zero_bubble, 0, 2, 4, 2); }),
                        {"pipeline_config.stages_per_rank", "need schedule interleaved_1F1B"});
  test::expect_contains(test::error_of([] { stage_actions(Schedule::interleaved_1f1b, 0, 2, 4, 1); }),
                        {"interleaved_1F1B needs pipeline_config.stages_per_rank >= 2"});
  test::expect_contains(test::error_of([] { stage_actions(Schedule::interleaved_1f1b, 0, 4, 6, 2); }),
                        {"pipeline_config.microbatches", "6 microbatches are not a multiple of 4"});
  test::expect_contains(test::error_of([] { stage_actions(Schedule::one_f_one_b, 0, 2, 4, 2); }),
                        {"pipeline_config.stages_per_rank", "need schedule interleaved_1F1B"});
}

}  // namespace
}  // namespace acc::pipeline
