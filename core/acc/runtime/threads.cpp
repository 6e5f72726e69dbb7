#include "acc/runtime/threads.h"

#include <omp.h>
#include <tbb/global_control.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "acc/util/error.h"

namespace acc::runtime {
namespace {
std::unique_ptr<tbb::global_control> g_tbb_limit;
int g_num_threads = 0;
}  // namespace

int default_num_threads(int local_ranks) {
  if (const char* env = std::getenv("ACC_NUM_THREADS"); env && *env) {
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    ACC_CHECK(end && *end == '\0' && n >= 1 && n <= 4096, "ACC_NUM_THREADS='", env,
              "' is not a thread count; expected a whole number from 1 to 4096");
    return static_cast<int>(n);
  }
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, local_ranks));
}

void set_num_threads(int n) {
  ACC_CHECK(n >= 1, "set_num_threads: expected at least 1 thread, got ", n);
  g_tbb_limit.reset();
  g_tbb_limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                      static_cast<size_t>(n));
  omp_set_num_threads(n);
  g_num_threads = n;
}

int num_threads() { return g_num_threads > 0 ? g_num_threads : default_num_threads(); }

}  // namespace acc::runtime
