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
#include <cstddef>

namespace acc::dist {

class StagingCopy {
 public:
  // Copies below this size are not timed (the clock would cost more than a wrong choice).
  static constexpr size_t kTimedBytes = size_t{64} << 10;
  // Far below a plain copy into a buffer the reader holds near (>= 9 GB/s measured), far
  // above one it holds far away (2-4.5 GB/s).
  static constexpr double kSlowBytesPerSecond = 6e9;
  static constexpr int kStreamingCopies = 256;

  void operator()(void* dst, const void* src, size_t bytes);

  // The choice for the next timed copy, and the update after a plain one (public for tests).
  bool streaming() const { return streaming_left_ > 0; }
  void record_plain(size_t bytes, double seconds);

 private:
  int streaming_left_ = 0;
};

}  // namespace acc::dist
