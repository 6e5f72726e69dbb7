#pragma once
// Saving when the job is preempted. A scheduler ends a job with SIGTERM (some send SIGUSR1
// ahead of time); `accelerate launch` turns the first one into SIGUSR1 to every rank. acc::init
// installs a handler that only records it. A training loop asks, once per step and on every
// rank, whether any rank has been asked (a collective, so that all stop after the same step),
// then saves and exits with kPreemptedExitCode, which launch reports as a preemption.
#include "acc/distributed/process_group.h"

namespace acc {

// The exit status of a run that stopped for preemption after saving (EX_TEMPFAIL: try again).
constexpr int kPreemptedExitCode = 75;

// Records SIGUSR1 from then on (acc::init calls it).
void install_preemption_handler();
// Whether this process got SIGUSR1.
bool preemption_requested();
// Whether any rank of `group` got it: the same answer on every rank. A collective.
bool preemption_agreed(dist::ProcessGroup& group);

}  // namespace acc
