#include "acc/kernels/detail/onednn_headroom.h"

#include <omp.h>
#include <pthread.h>
#include <sys/mman.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "acc/util/error.h"

namespace acc::kernels::detail {
namespace {

constexpr size_t kBuildHeadroom = size_t{4} << 20;  // a kernel build took 0.5-1.5 MiB
// Beside the stacks, libgomp allocates its team and pool, and glibc each thread's TLS.
constexpr size_t kTeamSlack = size_t{1} << 20;

// The size of the OpenMP team this thread has started (libgomp keeps a team per thread).
thread_local int t_team_threads = 1;

std::string mib(size_t bytes) { return std::to_string((bytes + (size_t{1} << 20) - 1) >> 20) + " MiB"; }

// The stack libgomp gives its threads: OMP_STACKSIZE or GOMP_STACKSIZE (a size with an optional
// B, K, M or G suffix, K when none), else that of any new thread.
size_t omp_stack_bytes() {
  for (const char* name : {"OMP_STACKSIZE", "GOMP_STACKSIZE"}) {
    const char* value = std::getenv(name);
    if (!value || !*value) continue;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(value, &end, 10);
    while (*end == ' ') ++end;
    const int unit = std::tolower(static_cast<unsigned char>(*end));
    const int shift = unit == 'b' ? 0 : unit == 'm' ? 20 : unit == 'g' ? 30 : 10;
    if (n > 0) return static_cast<size_t>(n) << shift;
  }
  size_t stack = size_t{8} << 20;
  pthread_attr_t attr;
  if (pthread_getattr_default_np(&attr) == 0) {
    pthread_attr_getstacksize(&attr, &stack);
    pthread_attr_destroy(&attr);
  }
  return stack;
}

void expect_mappable(size_t bytes, const std::string& needs, const std::function<std::string()>& what) {
  void* probe = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (probe == MAP_FAILED) {
    const int err = errno;
    ACC_FAIL("out of memory: ", what(), " needs ", needs, ", and this process may not map ", mib(bytes), " more (",
             std::strerror(err), ": its memory limit, ulimit -d or -v, or the system's is reached)");
  }
  ::munmap(probe, bytes);
}

}  // namespace

void expect_build_headroom(const std::function<std::string()>& what) {
  expect_mappable(kBuildHeadroom, "room for oneDNN to build its kernel", what);
}

void start_thread_team(const std::function<std::string()>& what) {
  const int threads = omp_get_max_threads();
  if (threads <= t_team_threads) return;
  const size_t stack = omp_stack_bytes();
  expect_mappable(static_cast<size_t>(threads - 1) * stack + kTeamSlack,
                  "the stacks of " + std::to_string(threads - 1) + " more OpenMP threads for oneDNN, " + mib(stack) +
                      " each (fewer with ACC_NUM_THREADS)",
                  what);
#pragma omp parallel num_threads(threads)
  {
  }
  t_team_threads = threads;
}

}  // namespace acc::kernels::detail
