// dist_failure MODE: the last rank misbehaves while the others run an all_reduce.
//   stall: it never joins. The others must fail at wait() with the timeout message naming it,
//          and the uncaught error must end the job with a non-zero exit.
//   throw: it raises an exception nobody catches. acc's terminate handler must abort the job
//          at once, so the others are stopped long before their timeout.
//   stall_queued: it never joins while the others have six all_reduces queued. All six must
//          fail within 1.5 timeouts: the first times out, the rest fail at once.
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <vector>
#include <string>
#include <thread>

#include "acc/distributed/environment.h"
#include "acc/runtime/init.h"
#include "acc/tensor/tensor.h"

int main(int argc, char** argv) {
  acc::init(argc, argv);
  const std::string mode = argc > 1 ? argv[1] : "stall";
  auto& world = acc::world();
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
  world.all_reduce(t);  // stall: throws after ACC_COMM_TIMEOUT
  return 0;
}
