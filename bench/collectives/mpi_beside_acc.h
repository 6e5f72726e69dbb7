#pragma once
// For the benchmarks that call OpenMPI themselves beside acc (its built-in collectives, its
// MPI_Send/Recv): MPI is initialised here with MPI_THREAD_SERIALIZED before acc::init (the mpi
// plugin then reuses it), so the main thread may call MPI while acc's comm thread is idle, and
// finalized only after acc has shut down.
#include <mpi.h>

#include "acc/runtime/init.h"

namespace acc::bench {

inline dist::ProcessGroup& init_mpi_and_acc(int& argc, char**& argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  init(argc, argv);
  return world();
}

inline void shutdown_acc_and_mpi() {
  shutdown();
  MPI_Finalize();
}

}  // namespace acc::bench
