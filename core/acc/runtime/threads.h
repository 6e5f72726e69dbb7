#pragma once
// One thread setting for the whole process: it sizes both oneTBB's pool (our kernels) and the
// OpenMP pool that Debian's oneDNN runs its matmuls on. ACC_NUM_THREADS overrides the default,
// which is the number of cores divided by the ranks on this node.
namespace acc::runtime {

// Default: ACC_NUM_THREADS if set, else max(1, hardware cores / local_ranks).
int default_num_threads(int local_ranks = 1);
// Applies n to oneTBB (global_control) and OpenMP; later calls replace earlier ones.
void set_num_threads(int n);
int num_threads();

}  // namespace acc::runtime
