// dist_failure MODE: the last rank misbehaves while the others run an all_reduce.
//   stall: it never joins. The others must fail at wait() with the timeout message naming it
//          and where they were, and the uncaught error must end the job with a non-zero exit.
//   throw: it raises an exception nobody catches. acc's terminate handler must abort the job
//          at once, so the others are stopped long before their timeout.
//   stall_queued: it never joins while the others have six all_reduces queued. All six must
//          fail within 1.5 timeouts: the first times out, the rest fail at once.
//   skip, other_op, other_size, other_unit: after a collective all ranks agree on, it skips
//          one, issues another op, another size, or the same from another unit. Every rank
//          that compares signatures with it must fail within 1 s, naming both sides (the
//          timeout is far longer, so a hang cannot pass).
//   stall_recv: as stall, but the others wait to receive a message from it (point to point,
//          through the shared-memory mailbox on one node): the timeout names it.
//   recv_too_small: the last rank sends 100 floats to rank 0, which has room for 10: rank 0's
//          receive fails saying so, and the job ends.
//   busy:  every rank prints "rank R pid P" and then all-reduces forever, as training does; a
//          test stops one rank from outside (kill -STOP) and times how fast the job ends.
//   partial_gradient: FULL_SHARD training where a unit only the last rank calls (a data-
//          dependent branch): the error must name the units whose collectives met, within 1 s.
//          (A branch inside a unit is no error: its gradient counts as zero where not taken;
//          tests/distributed/fsdp/bucket_test.cpp.)
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>
#include <string>
#include <thread>

#include <unistd.h>

#include "acc/accelerate/accelerate.h"
#include "acc/distributed/environment.h"
#include "acc/models/model.h"
#include "acc/nn/layers.h"
#include "acc/ops/elementwise.h"
#include "acc/ops/reduce.h"
#include "acc/runtime/init.h"
#include "acc/tensor/tensor.h"
#include "acc/util/activity.h"

namespace {

// Runs `body`, which must fail with a mismatch, and reports on this rank how fast it did.
void expect_mismatch(acc::dist::ProcessGroup& world, const std::function<void()>& body) {
  const auto start = std::chrono::steady_clock::now();
  try {
    body();
  } catch (const std::exception& e) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("rank %d: %s the mismatch (%.2f s): %s\n", world.rank(),
                seconds <= 1.0 ? "reported within 1 s" : "too slow to report", seconds, e.what());
    std::fflush(stdout);
    throw;
  }
  std::printf("rank %d: no error\n", world.rank());
}

// The last rank deviates as `mode` says.
void out_of_order(const std::string& mode, acc::dist::ProcessGroup& world) {
  const bool odd = world.rank() == world.size() - 1;
  acc::Tensor agreed = acc::Tensor::full({8}, 1.0);
  world.all_reduce(agreed);  // everyone is up: the clock starts now
  const int64_t n = 64 * world.size();
  acc::Tensor whole = acc::Tensor::full({n}, 1.0), part = acc::Tensor::full({64}, 1.0);
  expect_mismatch(world, [&] {
    if (mode == "skip") {
      if (!odd) world.all_gather(part, whole);
      world.reduce_scatter(whole, part);
    } else if (mode == "other_op") {
      if (odd) world.reduce_scatter(whole, part); else world.all_gather(part, whole);
    } else if (mode == "other_size") {
      acc::Tensor t = acc::Tensor::full({odd ? n + 1 : n}, 1.0);
      world.all_reduce(t);
    } else {  // other_unit: what a parameter with a gradient on some ranks only looks like
      acc::activity::Unit unit(odd ? "block.2" : "block.3");
      world.reduce_scatter(whole, part);
    }
  });
}

// Two layers; the second runs only where `branch` is set.
class Branching final : public acc::models::Model {
 public:
  explicit Branching(bool branch) : Model("Branching"), branch_(branch) {
    first_ = register_module("first", std::make_shared<acc::nn::Linear>(8, 8));
    second_ = register_module("second", std::make_shared<acc::nn::Linear>(8, 8));
  }
  acc::models::ModelOutput forward(const acc::data::Batch& batch) override {
    acc::Tensor h = (*first_)(batch["x"]);
    if (branch_) h = (*second_)(h);
    return {acc::Tensor(), acc::ops::mean(acc::ops::mul(h, h))};
  }
  double train_flops_per_token(int64_t) const override { return 0; }

 private:
  bool branch_;
  std::shared_ptr<acc::nn::Linear> first_, second_;
};

class Ones final : public acc::data::Dataset {
 public:
  int64_t size() const override { return 64; }
  acc::data::Batch get_batch(std::span<const int64_t> indices, const acc::data::EpochKey&) const override {
    acc::data::Batch batch;
    batch.set("x", acc::Tensor::full({static_cast<int64_t>(indices.size()), 8}, 1.0));
    return batch;
  }
};

void partial_gradient(acc::dist::ProcessGroup& world) {
  acc::Config config;
  config.dist.distributed_type = acc::DistributedType::FSDP;
  config.dist.fsdp.wrap_layer_cls = {"Linear"};  // each layer a unit
  acc::data::DataLoader all(std::make_shared<Ones>(), {.batch_size = 2 * world.size()});
  auto [sharded, loader] =
      acc::accelerate(std::make_shared<Branching>(world.rank() == world.size() - 1), all, config);
  expect_mismatch(world, [&] {
    sharded->forward(*loader.begin()).loss.backward();
    sharded->clip_grad_norm(1.0);
  });
}

}  // namespace

int main(int argc, char** argv) {
  acc::init(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "stall";
  auto& world = acc::world();
  if (mode == "busy") {
    std::printf("rank %d pid %d\n", world.rank(), static_cast<int>(getpid()));
    std::fflush(stdout);
    acc::Tensor t = acc::Tensor::full({1000}, 1.0);
    for (;;) world.all_reduce(t);
  }
  if (mode == "partial_gradient") {
    partial_gradient(world);
    return 0;
  }
  if (mode == "skip" || mode.starts_with("other_")) {
    out_of_order(mode, world);
    return 0;
  }
  if (mode == "recv_too_small") {
    if (world.rank() == world.size() - 1) world.send(acc::Tensor::full({100}, 1.0), 0, 5);
    if (world.rank() == 0) world.recv(acc::Tensor::zeros({10}), world.size() - 1, 5);
    world.barrier();
    return 0;
  }
  if (world.rank() == world.size() - 1) {
    if (mode == "throw") throw std::runtime_error("rank failed on purpose");
    std::this_thread::sleep_for(std::chrono::seconds(60));  // "hung": killed by mpirun
    return 0;
  }
  if (mode == "stall_queued") {
    const auto start = std::chrono::steady_clock::now();
    std::vector<acc::Tensor> tensors;
    std::vector<std::shared_ptr<acc::dist::Work>> works;
    for (int i = 0; i < 6; ++i) {
      tensors.push_back(acc::Tensor::full({1000}, 1.0));
      works.push_back(world.all_reduce_async(tensors.back()));
    }
    int failed = 0;
    for (auto& work : works) try {
        work->wait();
      } catch (const std::exception&) {
        ++failed;
      }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double bound = 1.5 * acc::dist::comm_timeout().count();
    if (failed == 6 && seconds <= bound)
      std::printf("all 6 queued collectives failed within the bound (%.1f s <= %.1f s)\n", seconds, bound);
    else
      std::printf("%d of 6 queued collectives failed after %.1f s (bound %.1f s)\n", failed, seconds, bound);
    std::fflush(stdout);
    throw std::runtime_error("the job stops after the failed collectives");
  }
  acc::Tensor t = acc::Tensor::full({1000}, 1.0);
  acc::activity::Phase phase("forward");  // the timeout message says where the rank was
  acc::activity::Unit unit("block.0");
  if (mode == "stall_recv")
    world.recv(t, world.size() - 1, 3);
  else
    world.all_reduce(t);  // stall: throws after ACC_COMM_TIMEOUT
  return 0;
}
