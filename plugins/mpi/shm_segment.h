#pragma once
// A POSIX shared-memory segment that every rank of a communicator on one node maps: made by
// the communicator's rank 0, which reserves it whole, and unlinked as soon as every rank has it
// mapped, so nothing is left in /dev/shm when a job dies. Used by the collectives' channel
// (shm_channel.h) and the point-to-point mailbox (shm_mailbox.h).
#include <mpi.h>

#include <cstddef>
#include <functional>

namespace acc::mpi {

struct SharedSegment {
  void* base = nullptr;  // null: no segment (on every rank alike)
  size_t bytes = 0;
};

// Collective over comm, blocking; call on the comm thread. `what` names the segment in
// /dev/shm ("/acc-<what>-<pid>-<n>") and in the warning logged when some rank could not make or
// map it, in which case every rank gets a null base. `init` lays out the fresh (zeroed) segment
// on rank 0 before any other rank maps it.
SharedSegment map_shared_segment(MPI_Comm comm, size_t bytes, const char* what,
                                 const std::function<void(void*)>& init);

void unmap_shared_segment(const SharedSegment& segment);

// Whether the environment variable `name` (ACC_SHM, ACC_SHM_P2P) is set to 0, turning a
// shared-memory transport off.
bool switched_off(const char* name);

}  // namespace acc::mpi
