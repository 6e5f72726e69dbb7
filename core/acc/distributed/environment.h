#pragma once
// What the distributed runtime reads from the environment (set by mpirun / accelerate launch).
#include <chrono>

namespace acc::dist {

// ACC_COMM_TIMEOUT in seconds (fractions allowed), default 600: how long one collective or
// transfer may wait for its peers before it fails.
std::chrono::duration<double> comm_timeout();

// This process's place in the job.
struct Topology {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;  // rank within its node
  int local_size = 1;  // ranks on its node
  int node = 0;        // index of its node
  int num_nodes = 1;

  // The node of any world rank: mpirun maps ranks to nodes in blocks (--map-by slot).
  int node_of(int world_rank) const { return world_rank / local_size; }
};

// From OMPI_COMM_WORLD_RANK/SIZE and OMPI_COMM_WORLD_LOCAL_RANK/LOCAL_SIZE (a single process
// when absent). ACC_RANKS_PER_NODE=k overrides the node split: ranks [0, k) are node 0, and so
// on, so hybrid strategies can be tested with simulated nodes on one machine.
Topology topology_from_env();

}  // namespace acc::dist
