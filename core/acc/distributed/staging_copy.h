#pragma once
// Copies into a staging buffer that ranks on other cores read next (the shared-memory channel
// of the mpi plugin). Plain stores must first take every line back from the reader's cache.
// When the reader's core is far away (another CCD or socket, or two vCPUs the host has placed
// apart, which it may change at any time) each of those transfers costs several hundred ns, and
// a 512 KiB fill fell from ~40 GB/s to ~2.5 GB/s (measured: docs/performance.md). Non-temporal
// stores do not need the lines back and write at ~28 GB/s whatever the placement, but the
// reader then reads memory instead of the writer's cache, which costs up to 40% when the
// reader is near. So plain stores are timed, and one slower than kSlowBytesPerSecond switches
// to streaming stores for the next kStreamingCopies copies; then plain stores are tried again.
// all_gather also keeps its shard in its own output: with plain stores both copies are made in
// one pass over the source (the time judged is then that of both, still far above the
// threshold when the reader is near: ~26 GB/s for 512 KiB).
#include <cstddef>

namespace acc::dist {

// Bytes of one staging buffer of the shared-memory channel: this core's L2 cache, within
// [256 KiB, 1 MiB] (512 KiB when the size is unknown), so that a step's fill and the peer's
// read of the previous one stay in L2. Measured at 2 ranks (docs/launch.md): with a 512 KiB L2,
// 256-512 KiB buffers were best and 1 MiB fell to 8-9 GB/s; with a 1 MiB L2, 1 MiB buffers
// lifted reduce_scatter at 1-4 MB from 0.45-0.66x of the cross-core copy to 0.76-0.93x.
size_t staging_buffer_bytes();

class StagingCopy {
 public:
  // Copies below this size are not timed (the clock would cost more than a wrong choice).
  static constexpr size_t kTimedBytes = size_t{64} << 10;
  // Far below a plain copy into a buffer the reader holds near (>= 9 GB/s measured), far
  // above one it holds far away (2-4.5 GB/s).
  static constexpr double kSlowBytesPerSecond = 6e9;
  static constexpr int kStreamingCopies = 256;

  // Copies `bytes` of src into the staging buffer and, when `keep` is not null, into `keep`
  // too, with streaming stores there if `keep_streaming` (a destination much larger than the
  // caches).
  void operator()(void* buffer, const void* src, size_t bytes, void* keep = nullptr,
                  bool keep_streaming = false);

  // The choice for the next timed copy, and the update after a plain one (public for tests).
  bool streaming() const { return streaming_left_ > 0; }
  void record_plain(size_t bytes, double seconds);

 private:
  int streaming_left_ = 0;
};

}  // namespace acc::dist
