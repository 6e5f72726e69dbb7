// The simulated cross-node link (ACC_SIM_CROSS_NODE_GBPS, ACC_SIM_CROSS_NODE_LATENCY_US): a
// collective of a group that spans (simulated) nodes takes at least latency + the bytes this
// rank sends / bandwidth, with the same result; a group inside a node is not paced; so are
// point-to-point messages from another node, at their receiver. Runs only
// where the test sets the link (test_dist_mpi_sim_link_np4, 2 simulated nodes of 2 ranks).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "acc/distributed/staging_copy.h"
#include "acc/distributed/subgroups.h"
#include "acc/distributed/traffic.h"
#include "acc/runtime/init.h"
#include "segments.h"

using acc::Tensor;

namespace {

double seconds_of(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST(SimLink, PacesCollectivesAcrossNodesOnly) {
  const char* gbps = std::getenv("ACC_SIM_CROSS_NODE_GBPS");
  const char* latency_us = std::getenv("ACC_SIM_CROSS_NODE_LATENCY_US");
  if (!gbps || acc::topology().num_nodes < 2) GTEST_SKIP() << "no simulated link between nodes";
  auto& g = acc::world();
  ASSERT_EQ(g.span(), acc::dist::Span::cross_node);
  const int64_t n = 1 << 18;  // 1 MB of f32
  Tensor x = Tensor::full({n}, 1.0);
  acc::dist::reset_traffic();
  const double paced = seconds_of([&] { g.all_reduce(x); });
  const uint64_t sent = acc::dist::traffic().bytes_of(acc::dist::TrafficKind::all_reduce);
  EXPECT_EQ(sent, 2 * (g.size() - 1) * uint64_t{4} * n / g.size());  // a ring's share of this rank
  const double link = (latency_us ? std::atof(latency_us) * 1e-6 : 0.0) +
                      static_cast<double>(sent) * 8.0 / (std::atof(gbps) * 1e9);
  EXPECT_GE(paced, link) << sent << " bytes";
  for (float v : x.to_vector()) ASSERT_EQ(v, static_cast<float>(g.size()));
  // Inside a node: the channel's own speed, far under the link's time.
  auto node = acc::dist::node_local_group(g, acc::topology());
  ASSERT_EQ(node->span(), acc::dist::Span::node);
  const double local = seconds_of([&] { node->all_reduce(x); });
  EXPECT_LT(local, link / 2) << "a node-local all_reduce was paced";
  for (float v : x.to_vector()) ASSERT_EQ(v, static_cast<float>(g.size() * node->size()));
}

// A message from another node reaches its receiver no sooner than the link carries it; one
// inside a node is not paced (the pipeline's activations cross nodes this way).
TEST(SimLink, PacesMessagesFromAnotherNodeAtTheReceiver) {
  const char* gbps = std::getenv("ACC_SIM_CROSS_NODE_GBPS");
  if (!gbps || acc::topology().num_nodes < 2) GTEST_SKIP() << "no simulated link between nodes";
  auto& g = acc::world();
  const int n = g.size(), r = g.rank(), local = acc::topology().local_size;
  const int64_t count = 1 << 18;  // 1 MB of f32
  const double link = static_cast<double>(4 * count) * 8.0 / (std::atof(gbps) * 1e9);
  // Rank r sends to the rank one node ahead and receives from the one a node behind, and then
  // the same inside its node.
  for (const int step : {local, 1}) {
    const bool across = step == local;
    if (!across && local < 2) continue;
    const int to = across ? (r + step) % n : (r / local) * local + (r % local + 1) % local;
    const int from = across ? (r - step + n) % n : (r / local) * local + (r % local + local - 1) % local;
    Tensor out = Tensor::full({count}, static_cast<double>(r)), in = Tensor::zeros({count});
    g.barrier();
    const double took = seconds_of([&] {
      auto sent = g.send_async(out, to, 7);
      g.recv_async(in, from, 7)->wait();
      sent->wait();
    });
    EXPECT_EQ(in.to_vector().front(), static_cast<float>(from));
    if (across)
      EXPECT_GE(took, link) << "a message from another node was not paced";
    else
      EXPECT_LT(took, link / 2) << "a message inside a node was paced";
  }
}

// Across nodes urgent collectives run on a lane of their own (dist::Lane): a gather issued
// behind three slow reductions waits only for the one already on the link (they share it),
// not for the two queued after it.
TEST(SimLink, AnUrgentGatherPassesQueuedReductions) {
  if (!std::getenv("ACC_SIM_CROSS_NODE_GBPS") || acc::topology().num_nodes < 2)
    GTEST_SKIP() << "no simulated link between nodes";
  auto& g = acc::world();
  const int64_t n = 1 << 18;  // 1 MB of f32: about 120 ms of the test's link per all_reduce
  std::vector<Tensor> reduced;
  std::vector<std::shared_ptr<acc::dist::Work>> reductions;
  for (int i = 0; i < 3; ++i) {
    reduced.push_back(Tensor::full({n}, 1.0));
    reductions.push_back(g.all_reduce_async(reduced.back()));
  }
  Tensor mine = Tensor::full({16}, static_cast<float>(g.rank())), all = Tensor::zeros({16 * g.size()});
  g.all_gather_async(mine, all, acc::dist::Lane::urgent)->wait();
  EXPECT_FALSE(reductions[1]->is_completed()) << "the gather waited for a reduction issued before it";
  EXPECT_FALSE(reductions[2]->is_completed());
  const auto gathered = all.to_vector();
  for (int r = 0; r < g.size(); ++r) ASSERT_EQ(gathered[16 * r], static_cast<float>(r));
  for (size_t i = 0; i < reductions.size(); ++i) {
    reductions[i]->wait();
    for (float v : reduced[i].to_vector()) ASSERT_EQ(v, static_cast<float>(g.size()));
  }
}

// On one node the urgent lane has a shared-memory channel of its own (the world's is counted
// twice, as the estimate says; beside the mailbox), and a node-local urgent gather of several staging steps runs
// on it beside the ordered channel: it neither waits for the paced reductions queued before
// it nor disturbs them.
TEST(SimLink, TheUrgentLaneHasASharedMemoryChannelOfItsOwn) {
  if (!std::getenv("ACC_SIM_CROSS_NODE_GBPS") || acc::topology().num_nodes < 2)
    GTEST_SKIP() << "no simulated link between nodes";
  auto& g = acc::world();
  const int64_t p = g.size();
  EXPECT_EQ(g_communication_bytes_after_init, 2 * channel_segment_bytes(p) + mailbox_segment_bytes(p));
  auto node = acc::dist::node_local_group(g, acc::topology());
  const int64_t n = 1 << 18;
  std::vector<Tensor> reduced;
  std::vector<std::shared_ptr<acc::dist::Work>> reductions;
  for (int i = 0; i < 2; ++i) {
    reduced.push_back(Tensor::full({n}, 1.0));
    reductions.push_back(g.all_reduce_async(reduced.back()));
  }
  const int64_t m = 3 * static_cast<int64_t>(acc::dist::staging_buffer_bytes()) / 4;  // 3 steps
  Tensor mine = Tensor::full({m}, static_cast<float>(node->rank() + 1)), all = Tensor::zeros({m * node->size()});
  node->all_gather_async(mine, all, acc::dist::Lane::urgent)->wait();
  EXPECT_FALSE(reductions[1]->is_completed()) << "the node's gather waited for the cross-node reductions";
  const auto gathered = all.to_vector();
  for (int r = 0; r < node->size(); ++r) {
    ASSERT_EQ(gathered[m * r], static_cast<float>(r + 1));
    ASSERT_EQ(gathered[m * r + m - 1], static_cast<float>(r + 1));
  }
  for (size_t i = 0; i < reductions.size(); ++i) {
    reductions[i]->wait();
    for (float v : reduced[i].to_vector()) ASSERT_EQ(v, static_cast<float>(p));
  }
}
