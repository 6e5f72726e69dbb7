#pragma once
// What the mpi plugin maps in shared memory for a group of p ranks on one node, as its layout
// (plugins/mpi/shm_channel.h, shm_mailbox.h) makes it: the tests check that all of it is counted.
#include <cstdint>

#include "acc/distributed/staging_copy.h"

// Communication bytes right after init, before any collective has taken scratch buffers
// (main.cpp).
extern int64_t g_communication_bytes_after_init;

// A collectives channel: 448 bytes of counters per rank, two staging buffers per rank.
inline int64_t channel_segment_bytes(int64_t p) {
  return p * 448 + p * 2 * static_cast<int64_t>(acc::dist::staging_buffer_bytes());
}

// The point-to-point mailbox: 64 bytes per rank; from each rank to each a lane of a 64-byte
// header and 64 slots of 128 bytes.
inline int64_t mailbox_segment_bytes(int64_t p) { return p * 64 + p * p * (64 + 64 * 128); }
