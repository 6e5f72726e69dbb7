#include "acc/runtime/preemption.h"

#include <signal.h>

#include <atomic>

#include "acc/distributed/agreement.h"

namespace acc {
namespace {

std::atomic<bool> g_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

extern "C" void record_preemption(int) { g_requested.store(true); }

}  // namespace

void install_preemption_handler() {
  struct sigaction action = {};
  action.sa_handler = record_preemption;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a blocking read on this thread goes on
  sigaction(SIGUSR1, &action, nullptr);
}

bool preemption_requested() { return g_requested.load(); }

bool preemption_agreed(dist::ProcessGroup& group) { return dist::any_rank(group, preemption_requested()); }

}  // namespace acc
