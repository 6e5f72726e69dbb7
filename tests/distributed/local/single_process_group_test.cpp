#include "acc/distributed/single_process_group.h"

#include <gtest/gtest.h>

#include <thread>

#include "acc/distributed/subgroups.h"
#include "error_matchers.h"

using acc::Tensor;
using acc::dist::ReduceOp;
using acc::dist::SingleProcessGroup;

TEST(SingleProcessGroup, CollectivesAreLocalCopies) {
  SingleProcessGroup g;
  EXPECT_EQ(g.rank(), 0);
  EXPECT_EQ(g.size(), 1);
  const Tensor in = Tensor::from_vector({1, 2, 3}, {3});
  Tensor out = Tensor::zeros({3});
  g.all_gather(in, out);
  EXPECT_EQ(out.to_vector(), in.to_vector());
  out.zero_();
  g.reduce_scatter(in, out, ReduceOp::avg);
  EXPECT_EQ(out.to_vector(), in.to_vector());
  Tensor t = in.clone();
  g.all_reduce(t, ReduceOp::sum);
  g.broadcast(t, 0);
  g.barrier();
  EXPECT_EQ(t.to_vector(), in.to_vector());
  auto work = g.all_reduce_async(t);
  EXPECT_TRUE(work->is_completed());
  work->wait(std::chrono::seconds(1));
}

TEST(SingleProcessGroup, BadArgumentsNameOpShapesAndExpectation) {
  SingleProcessGroup g;
  EXPECT_ACC_ERROR(g.all_gather(Tensor::zeros({3}), Tensor::zeros({4})),
                   {"all_gather", "f32[3]", "f32[4]", "expected output numel 3"});
  EXPECT_ACC_ERROR(g.reduce_scatter(Tensor::zeros({3}), Tensor::zeros({3}, acc::DType::bf16)),
                   {"reduce_scatter", "f32[3]", "bf16[3]", "same dtype"});
  EXPECT_ACC_ERROR(g.all_reduce(Tensor::zeros({3}, acc::DType::i32), ReduceOp::avg),
                   {"all_reduce", "avg needs f32 or bf16", "i32[3]"});
  EXPECT_ACC_ERROR(g.all_gather_v(Tensor::zeros({3}), Tensor::zeros({3}), {1, 2}),
                   {"all_gather", "2 counts [1, 2]", "expected one per rank"});
  EXPECT_ACC_ERROR(g.broadcast(Tensor::zeros({1}), 1), {"broadcast: root 1", "0 <= root < 1"});
  EXPECT_ACC_ERROR(g.send(Tensor::zeros({1}), 0), {"send: peer 0", "expected another rank"});
  EXPECT_ACC_ERROR(g.all_reduce(Tensor()), {"all_reduce", "undefined"});
}

TEST(SingleProcessGroup, SplitAndSubgroups) {
  SingleProcessGroup g;
  EXPECT_EQ(g.split(-1), nullptr);
  auto sub = g.split(3, 0, "mine");
  ASSERT_TRUE(sub);
  EXPECT_EQ(sub->name(), "mine");
  EXPECT_EQ(sub->size(), 1);
  acc::dist::Topology t;
  EXPECT_EQ(acc::dist::node_local_group(g, t)->size(), 1);
  EXPECT_EQ(acc::dist::cross_node_group(g, t)->size(), 1);
  EXPECT_EQ(acc::dist::mesh_axis_group(g, {1, 1}, 1)->size(), 1);
  EXPECT_ACC_ERROR(acc::dist::mesh_axis_group(g, {2, 1}, 0), {"mesh of 2 ranks", "size 1"});
}

TEST(Work, FailureSurfacesAtWaitAndWaitCanTimeOut) {
  acc::dist::Work failed("all_gather #3 on group 'g' (ranks [0])");
  failed.mark_failed("all_gather #3 on group 'g' (ranks [0]): peer lost");
  EXPECT_TRUE(failed.is_completed());
  EXPECT_ACC_ERROR(failed.wait(), {"peer lost"});
  acc::dist::Work pending("barrier #0 on group 'g' (ranks [0])");
  EXPECT_FALSE(pending.is_completed());
  EXPECT_ACC_ERROR(pending.wait(std::chrono::milliseconds(20)),
                   {"barrier #0", "has not completed"});
}

// A backend's runner lets the waiting thread do the work itself (the mpi plugin's shared-memory
// collectives): wait() calls it once; a runner that declines leaves the wait to the backend.
TEST(Work, WaitRunsTheRunnerOnceUnlessDoneOrBounded) {
  acc::dist::Work work("all_reduce #1 on group 'g' (ranks [0, 1])");
  int runs = 0;
  work.set_runner([&] {
    ++runs;
    work.mark_done();
  });
  work.wait();
  EXPECT_EQ(runs, 1);
  work.wait();  // done: the runner was dropped with completion
  EXPECT_EQ(runs, 1);

  acc::dist::Work declined("all_gather #2 on group 'g' (ranks [0, 1])");
  std::thread backend;
  declined.set_runner([&] {  // declines: the backend's thread completes the work
    ++runs;
    backend = std::thread([&] { declined.mark_done(); });
  });
  declined.wait();
  backend.join();
  EXPECT_EQ(runs, 2);

  acc::dist::Work bounded("barrier #3 on group 'g' (ranks [0, 1])");
  bounded.set_runner([&] { ++runs; });
  EXPECT_ACC_ERROR(bounded.wait(std::chrono::milliseconds(5)), {"barrier #3", "has not completed"});
  EXPECT_EQ(runs, 2);  // a bounded wait does not run what may take longer than its bound
  bounded.mark_done();
}
