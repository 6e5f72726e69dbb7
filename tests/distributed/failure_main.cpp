// dist_failure MODE: the last rank misbehaves while the others run an all_reduce.
//   stall: it never joins. The others must fail at wait() with the timeout message naming it,
//          and the uncaught error must end the job with a non-zero exit.
//   throw: it raises an exception nobody catches. acc's terminate handler must abort the job
//          at once, so the others are stopped long before their timeout.
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

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
  acc::Tensor t = acc::Tensor::full({1000}, 1.0);
  world.all_reduce(t);  // stall: throws after ACC_COMM_TIMEOUT
  return 0;
}
