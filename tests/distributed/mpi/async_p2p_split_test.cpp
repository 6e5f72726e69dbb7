// Asynchronous overlap, point to point, and subgroups.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include "acc/distributed/subgroups.h"
#include "acc/runtime/init.h"

using acc::Tensor;

TEST(Async, CollectivesOverlapComputationAndCompleteInOrder) {
  auto& g = acc::world();
  const int64_t n = 1 << 20;  // 4 MB per rank
  Tensor in = Tensor::full({n}, g.rank() + 1.0);
  Tensor gathered = Tensor::zeros({n * g.size()});
  Tensor summed = Tensor::full({4097}, 1.0);
  auto w1 = g.all_gather_async(in, gathered);
  auto w2 = g.all_reduce_async(summed);
  // Computation on this thread while the comm thread moves the data.
  double acc = 0;
  for (int i = 0; i < 2000000; ++i) acc += std::sqrt(static_cast<double>(i));
  EXPECT_GT(acc, 0);
  w2->wait();  // out of order waits are fine
  w1->wait();
  EXPECT_TRUE(w1->is_completed());
  const auto v = gathered.to_vector();
  for (int r = 0; r < g.size(); ++r) EXPECT_EQ(v[r * n + n / 2], r + 1.f);
  for (float x : summed.to_vector()) EXPECT_EQ(x, static_cast<float>(g.size()));
}

// A process's collectives run in issue order across groups (process_group.h): an all-reduce on
// another group may read a reduce-scatter's output before anyone waited for it, as FSDP's
// hybrid gradient reduction does.
TEST(Async, CollectivesOfDifferentGroupsRunInIssueOrder) {
  auto& g = acc::world();
  auto pairs = g.split(g.rank() / 2, g.rank());  // {0, 1}, {2, 3}: a reduce-scatter group each
  auto across = g.split(g.rank() % 2, g.rank());  // the other axis
  const int64_t n = 1 << 18;
  Tensor in = Tensor::full({n * pairs->size()}, g.rank() + 1.0);
  Tensor part = Tensor::zeros({n});
  auto rs = pairs->reduce_scatter_async(in, part);
  auto ar = across->all_reduce_async(part);
  ar->wait();
  rs->wait();
  float expected = 0;  // every rank's value: summed over the pair, then across the pairs
  for (int r = 0; r < g.size(); ++r) expected += r + 1.f;
  for (float x : part.to_vector()) ASSERT_EQ(x, expected);
}

TEST(PointToPoint, RingExchangeWithTags) {
  auto& g = acc::world();
  const int right = (g.rank() + 1) % g.size(), left = (g.rank() + g.size() - 1) % g.size();
  Tensor a = Tensor::full({1000}, g.rank()), b = Tensor::full({3}, 10.0 * g.rank());
  Tensor from_left_a = Tensor::zeros({1000}), from_left_b = Tensor::zeros({3});
  // Receives posted in the opposite order of the sends: tags keep them apart.
  auto rb = g.recv_async(from_left_b, left, 2);
  auto ra = g.recv_async(from_left_a, left, 1);
  auto sa = g.send_async(a, right, 1);
  auto sb = g.send_async(b, right, 2);
  for (auto& w : {rb, ra, sa, sb}) w->wait();
  for (float x : from_left_a.to_vector()) EXPECT_EQ(x, static_cast<float>(left));
  for (float x : from_left_b.to_vector()) EXPECT_EQ(x, 10.f * left);
}

// Messages of one tag arrive in the order they were sent, and receives of one tag are matched
// in the order they were posted, whichever is waited for first.
TEST(PointToPoint, OneTagKeepsItsOrder) {
  auto& g = acc::world();
  const int right = (g.rank() + 1) % g.size(), left = (g.rank() + g.size() - 1) % g.size();
  std::vector<Tensor> sent, received;
  std::vector<std::shared_ptr<acc::dist::Work>> sends, recvs;
  for (int i = 0; i < 5; ++i) {
    received.push_back(Tensor::zeros({7}));
    recvs.push_back(g.recv_async(received.back(), left, 4));
  }
  for (int i = 0; i < 5; ++i) {
    sent.push_back(Tensor::full({7}, 100.0 * g.rank() + i));
    sends.push_back(g.send_async(sent.back(), right, 4));
  }
  for (int i = 4; i >= 0; --i) recvs[static_cast<size_t>(i)]->wait();  // the last posted first
  for (auto& w : sends) w->wait();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(received[static_cast<size_t>(i)].to_vector()[6], 100.f * left + i) << i;
}

// The same when a later message of the tag lands in a lower slot of the mailbox than an earlier
// one: a message of another tag taken first leaves a hole that the next send fills.
TEST(PointToPoint, OneTagKeepsItsOrderAcrossHolesInTheLane) {
  auto& g = acc::world();
  const int right = (g.rank() + 1) % g.size(), left = (g.rank() + g.size() - 1) % g.size();
  auto value = [&](int rank, int i) { return 100.0 * rank + i; };
  std::vector<Tensor> sent;
  std::vector<std::shared_ptr<acc::dist::Work>> sends;
  auto send = [&](int i, int tag) {
    sent.push_back(Tensor::full({30}, value(g.rank(), i)));  // past the slot's own 88 bytes
    sends.push_back(g.send_async(sent.back(), right, tag));
  };
  send(0, 5);
  send(1, 6);
  send(2, 5);
  Tensor other = Tensor::zeros({30});
  g.recv(other, left, 6);  // frees the second slot
  g.barrier();             // every rank took it before anyone sends on
  send(3, 5);              // into the freed slot, below message 2's
  for (int i : {0, 2, 3}) {
    Tensor in = Tensor::zeros({30});
    g.recv(in, left, 5);
    EXPECT_EQ(in.to_vector()[29], value(left, i)) << "message " << i;
  }
  EXPECT_EQ(other.to_vector()[0], value(left, 1));
  for (auto& w : sends) w->wait();
}

// More messages in flight to one peer than the shared-memory mailbox has slots (64): the sends
// past them wait for room without blocking their caller, and are posted by the comm thread while
// the sender blocks in a collective; all arrive in order.
TEST(PointToPoint, MoreMessagesInFlightThanSlots) {
  auto& g = acc::world();
  constexpr int kMessages = 150;
  const bool sender = g.rank() % 2 == 0 && g.rank() + 1 < g.size(), receiver = g.rank() % 2 == 1;
  std::vector<Tensor> sent;
  std::vector<std::shared_ptr<acc::dist::Work>> sends;
  if (sender)
    for (int i = 0; i < kMessages; ++i) {
      sent.push_back(Tensor::full({3}, 1000.0 * g.rank() + i));
      sends.push_back(g.send_async(sent.back(), g.rank() + 1, 9));
    }
  g.barrier();  // every send is issued: receiving starts only now
  if (receiver)
    for (int i = 0; i < kMessages; ++i) {
      Tensor in = Tensor::zeros({3});
      g.recv(in, g.rank() - 1, 9);
      ASSERT_EQ(in.to_vector()[2], 1000.f * (g.rank() - 1) + i) << i;
    }
  g.barrier();  // the sender waits here while the receiver takes every message
  for (auto& w : sends) w->wait();
}

// A large message arrives whole (the mailbox copies it out of the sender's memory in one go),
// and a shorter message than the receive buffer fills only its part, as with MPI.
TEST(PointToPoint, LargeAndShortMessages) {
  auto& g = acc::world();
  const int right = (g.rank() + 1) % g.size(), left = (g.rank() + g.size() - 1) % g.size();
  const int64_t n = int64_t{12} << 20;  // 48 MB
  Tensor big = Tensor::empty({n}), into = Tensor::zeros({n});
  float* b = big.data<float>();
  for (int64_t i = 0; i < n; ++i) b[i] = static_cast<float>(i % 65536 + g.rank());
  auto s = g.send_async(big, right, 1);
  g.recv(into, left, 1);
  s->wait();
  const auto v = into.to_vector();
  for (int64_t i : {int64_t{0}, int64_t{4095}, int64_t{4096}, n / 2 + 3, n - 1})
    ASSERT_EQ(v[static_cast<size_t>(i)], static_cast<float>(i % 65536 + left)) << i;
  Tensor room = Tensor::full({10}, -1.0);
  auto s2 = g.send_async(Tensor::full({4}, g.rank()), right, 2);
  g.recv(room, left, 2);
  s2->wait();
  const auto r = room.to_vector();
  EXPECT_EQ(r[3], static_cast<float>(left));
  EXPECT_EQ(r[4], -1.f);
}

// Polling is_completed() alone completes a receive (and the send it matches): nothing else
// moves a shared-memory message along.
TEST(PointToPoint, PollingCompletesWithoutWait) {
  auto& g = acc::world();
  const int right = (g.rank() + 1) % g.size(), left = (g.rank() + g.size() - 1) % g.size();
  Tensor in = Tensor::zeros({5});
  auto r = g.recv_async(in, left, 6);
  auto s = g.send_async(Tensor::full({5}, g.rank() + 1.0), right, 6);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(r->is_completed() && s->is_completed()) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  ASSERT_TRUE(r->is_completed() && s->is_completed()) << "polling did not complete them in 20 s";
  EXPECT_EQ(in.to_vector()[4], left + 1.f);
  r->wait();
  s->wait();
}

TEST(Split, EvenOddGroupsReduceOverMembersOnly) {
  auto& g = acc::world();
  auto sub = g.split(g.rank() % 2, -g.rank(), "parity");  // key reverses the order
  ASSERT_TRUE(sub);
  std::vector<int> members;
  for (int r = g.size() - 1; r >= 0; --r)
    if (r % 2 == g.rank() % 2) members.push_back(r);
  EXPECT_EQ(sub->world_ranks(), members);
  EXPECT_EQ(sub->world_ranks()[sub->rank()], g.rank());
  Tensor t = Tensor::full({5}, g.rank());
  sub->all_reduce(t);
  float want = 0;
  for (int r : members) want += r;
  for (float x : t.to_vector()) EXPECT_EQ(x, want);
  // Only some ranks join a group: the others get null and the world still works.
  auto firsts = g.split(g.rank() == 0 ? -1 : 0);
  EXPECT_EQ(firsts == nullptr, g.rank() == 0);
  if (firsts) firsts->barrier();
  g.barrier();
}

TEST(Split, SimulatedNodesAndMeshAxes) {
  auto& g = acc::world();
  if (g.size() % 2) GTEST_SKIP() << "needs an even world";
  // Two ranks per simulated node, as ACC_RANKS_PER_NODE=2 would give.
  acc::dist::Topology t;
  t.rank = g.rank();
  t.world_size = g.size();
  t.local_size = 2;
  t.local_rank = g.rank() % 2;
  t.node = g.rank() / 2;
  t.num_nodes = g.size() / 2;
  auto node = acc::dist::node_local_group(g, t);
  auto cross = acc::dist::cross_node_group(g, t);
  EXPECT_EQ(node->size(), 2);
  EXPECT_EQ(node->rank(), t.local_rank);
  EXPECT_EQ(cross->size(), t.num_nodes);
  EXPECT_EQ(cross->rank(), t.node);
  Tensor x = Tensor::full({9}, 1.0);
  node->all_reduce(x);
  cross->all_reduce(x);
  for (float v : x.to_vector()) EXPECT_EQ(v, static_cast<float>(g.size()));
  // Mesh (num_nodes, 2): axis 1 is the node-local pair, axis 0 the cross-node column.
  auto axis1 = acc::dist::mesh_axis_group(g, {g.size() / 2, 2}, 1);
  EXPECT_EQ(axis1->world_ranks(), node->world_ranks());
  auto axis0 = acc::dist::mesh_axis_group(g, {g.size() / 2, 2}, 0);
  EXPECT_EQ(axis0->world_ranks(), cross->world_ranks());
  // Collectives on a subgroup carry its name in their description.
  auto w = node->barrier_async();
  EXPECT_NE(w->description().find("barrier #"), std::string::npos);
  EXPECT_NE(w->description().find("world/node"), std::string::npos);
  w->wait();
}
