#pragma once
// acc::init: the first call of every acc program. It configures logging, finds this process's
// rank and node from the environment mpirun sets, makes the world process group (the "mpi"
// comm backend plugin when the world has more than one rank, the built-in single-process group
// otherwise; ACC_COMM_BACKEND names another backend), sizes the thread pools to
// cores / ranks on this node, and installs a terminate handler: an uncaught exception on one
// rank is logged and aborts the whole job instead of leaving the other ranks waiting. It also
// records SIGUSR1, the preemption notice (runtime/preemption.h).
#include <functional>

#include "acc/distributed/environment.h"
#include "acc/distributed/process_group.h"

namespace acc {

// Safe to call once per process; argc/argv are reserved for runtime flags (none yet).
void init(int argc, char** argv);
bool initialized();
// Runs the at_shutdown work, then releases the world group (finalizing MPI). Runs at exit if
// not called; idempotent.
void shutdown();
// Work for shutdown() to do first, while the world group still exists (every rank runs it):
// committing an asynchronous checkpoint still being written. An exception is logged, not thrown.
// Registered work runs once, in the order registered.
void at_shutdown(std::function<void()> work);

// The world group and this process's topology; init() must have run.
dist::ProcessGroup& world();
std::shared_ptr<dist::ProcessGroup> world_ptr();
const dist::Topology& topology();

// RAII: init in the constructor, shutdown in the destructor.
class Session {
 public:
  Session(int argc, char** argv) { init(argc, argv); }
  ~Session() { shutdown(); }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
};

}  // namespace acc
