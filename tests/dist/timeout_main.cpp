// One rank stops participating: the last rank never joins the all_reduce. Every other rank
// must fail at wait() with the timeout message naming the missing rank, and the uncaught
// error must end the job with a non-zero exit (acc's terminate handler aborts through MPI).
#include <chrono>
#include <thread>

#include "acc/runtime/init.h"
#include "acc/tensor/tensor.h"

int main(int argc, char** argv) {
  acc::init(argc, argv);
  auto& world = acc::world();
  if (world.rank() == world.size() - 1) {
    std::this_thread::sleep_for(std::chrono::seconds(60));  // "hung": killed by mpirun
    return 0;
  }
  acc::Tensor t = acc::Tensor::full({1000}, 1.0);
  world.all_reduce(t);  // throws after ACC_COMM_TIMEOUT
  return 0;
}
