// fsdp_reshard_after_forward: node (ZeRO++'s hpZ): after a block's forward FULL_SHARD keeps a
// copy of it sharded among the node's ranks, so the backward's gathers never cross nodes. At 4
// ranks the suite runs as 2 simulated nodes of 2 (ACC_RANKS_PER_NODE=2): trained as one
// process, no cross-node gather after the forward, and the memory the estimate states.
#include <gtest/gtest.h>

#include "acc/distributed/traffic.h"
#include "acc/memory/allocator.h"
#include "fsdp/fsdp_estimate.h"
#include "fsdp_fixtures.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

bool crosses_nodes() { return topology().num_nodes > 1; }

Config node_copy_config(bool node_copies) {
  Config config = strategy_config("FULL_SHARD", "gpt2");
  config.dist.fsdp.reshard_to_node = node_copies;
  config.dist.fsdp.vocab_parallel = false;  // its ops all-gather activations across nodes too
  return config;
}

TEST(NodeCopies, TrainAsOneProcess) {
  constexpr int64_t kSteps = 3, kGlobalBatch = 8;
  const RunResult single = run_single_process("gpt2", kSteps, kGlobalBatch);
  const RunResult run = run_accelerated("gpt2", node_copy_config(true), kSteps, kGlobalBatch);
  // The equivalence test's f32 bounds: the node copies hold the gathered values themselves.
  EXPECT_TRUE(all_close(run.losses, single.losses, 1e-5f, 0.f));
  EXPECT_TRUE(all_close(run.norms, single.norms, 1e-5f, 0.f)) << "gradient norms";
  ASSERT_EQ(run.params.size(), single.params.size());
  for (size_t i = 0; i < single.params.size(); ++i)
    EXPECT_TRUE(all_close(run.params[i].second, single.params[i].second, 1e-5f, f32_param_atol("gpt2", "FULL_SHARD")))
        << single.params[i].first;
}

// Cross-node gather bytes after the forward: none with node copies (the backward gathers
// inside the node), some without.
TEST(NodeCopies, TheBackwardGathersInsideTheNode) {
  if (!crosses_nodes()) GTEST_SKIP() << "one node: no gather crosses nodes";
  using dist::Span;
  using dist::TrafficKind;
  for (const bool node_copies : {false, true}) {
    data::DataLoader all(make_dataset("gpt2", 8), {.batch_size = 8, .prefetch = 0});
    auto [sharded, loader] = accelerate(make_model("gpt2"), all, node_copy_config(node_copies));
    dist::reset_traffic();
    auto out = sharded->forward(*loader.begin());
    const dist::Traffic forward = dist::traffic();
    out.loss.backward();
    const dist::Traffic step = dist::traffic();
    const uint64_t backward_cross = step.bytes_of(TrafficKind::all_gather, Span::cross_node) -
                                    forward.bytes_of(TrafficKind::all_gather, Span::cross_node);
    const uint64_t backward_node = step.bytes_of(TrafficKind::all_gather, Span::node) -
                                   forward.bytes_of(TrafficKind::all_gather, Span::node);
    if (node_copies) {
      EXPECT_EQ(backward_cross, 0u);
      EXPECT_GT(backward_node, 0u);
    } else {
      EXPECT_GT(backward_cross, 0u);
      EXPECT_EQ(backward_node, 0u);
    }
  }
}

// The node copies' cost per rank: more parameter memory during a step, at most what the
// estimate adds for them (every block's copy at once, as at the end of the forward) and at
// least one block's copy (what the backward still holds while the next block is gathered).
TEST(NodeCopies, CostWhatTheEstimateStates) {
  if (!crosses_nodes()) GTEST_SKIP() << "one node: no node copies";
  int64_t peak[2] = {0, 0};
  for (const bool node_copies : {false, true}) {
    data::DataLoader all(make_dataset("gpt2", 16), {.batch_size = 8, .prefetch = 0});
    auto [sharded, loader] = accelerate(make_model("gpt2"), all, node_copy_config(node_copies));
    for (auto& batch : loader) {  // the second step's peak
      memory::reset_peaks();
      sharded->forward(batch).loss.backward();
    }
    peak[node_copies] = memory::report()[memory::Category::parameters].peak;
  }
  const auto shape = estimate::ModelShape::of(*make_model("gpt2"));
  const estimate::Workload w{.world = world().size(), .ranks_per_node = topology().local_size, .batch = 8, .seq = 16};
  fsdp::Plan plan{.vocab_parallel = false};
  const int64_t without = fsdp::estimate(shape, plan, w).gathered;
  plan.reshard_to_node = true;
  const int64_t stated = fsdp::estimate(shape, plan, w).gathered - without;
  const int64_t measured = peak[1] - peak[0];
  EXPECT_GT(stated, 0);
  EXPECT_LE(measured, stated * 105 / 100) << "measured " << measured << " bytes, estimated " << stated;
  EXPECT_GE(measured, stated / shape.layers) << "measured " << measured << " bytes, estimated " << stated;
}

}  // namespace
}  // namespace acc::test
