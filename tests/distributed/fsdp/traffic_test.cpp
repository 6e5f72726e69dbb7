// dist::traffic() keeps node-local and cross-node groups apart. HYBRID_SHARD at 4 ranks on 2
// simulated nodes (ACC_RANKS_PER_NODE=2) gathers and reduce-scatters inside a node and only
// all-reduces the gradient shards across nodes; with all ranks on one node nothing crosses.
#include <gtest/gtest.h>

#include "acc/distributed/traffic.h"
#include "fsdp_fixtures.h"

namespace acc::test {
namespace {

TEST(Traffic, HybridShardCrossesNodesOnlyToReduceGradients) {
  const int p = world().size();
  const Config config = strategy_config("HYBRID_SHARD", "gpt2");
  data::DataLoader all(make_dataset("gpt2", 8), {.batch_size = 8});
  auto [sharded, loader] = accelerate(make_model("gpt2"), all, config);
  dist::reset_traffic();
  sharded->forward(*loader.begin()).loss.backward();
  const dist::Traffic sent = dist::traffic();
  using dist::Span;
  using dist::TrafficKind;
  if (p == 1) {
    EXPECT_EQ(sent.total_bytes(), 0u);
    return;
  }
  EXPECT_GT(sent.bytes_of(TrafficKind::all_gather, Span::node), 0u);
  EXPECT_GT(sent.bytes_of(TrafficKind::reduce_scatter, Span::node), 0u);
  EXPECT_EQ(sent.bytes_of(TrafficKind::all_gather, Span::cross_node), 0u);
  EXPECT_EQ(sent.bytes_of(TrafficKind::reduce_scatter, Span::cross_node), 0u);
  if (topology().num_nodes == 1) {
    EXPECT_EQ(sent.total_bytes(Span::cross_node), 0u);
  } else {
    // Every reduce-scatter's shard is then all-reduced over the replicas, once per reduction.
    EXPECT_EQ(sent.calls_of(TrafficKind::all_reduce, Span::cross_node),
              sent.calls_of(TrafficKind::reduce_scatter, Span::node));
    EXPECT_GT(sent.total_bytes(Span::cross_node), 0u);
  }
  EXPECT_NE(sent.describe().find("node-local: all_gather"), std::string::npos) << sent.describe();
}

}  // namespace
}  // namespace acc::test
