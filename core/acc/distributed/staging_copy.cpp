#include "acc/distributed/staging_copy.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "acc/distributed/reduce_kernels.h"

namespace acc::dist {

size_t staging_buffer_bytes() {
  constexpr long kMin = 256L << 10, kMax = 1L << 20, kUnknown = 512L << 10;
  const long l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  const long bytes = l2 > 0 ? std::clamp(l2, kMin, kMax) : kUnknown;
  return static_cast<size_t>(bytes / 4096 * 4096);  // whole pages, so a multiple of 64
}

void StagingCopy::operator()(void* buffer, const void* src, size_t bytes, void* keep,
                             bool keep_streaming) {
  if (bytes == 0) return;  // an empty slot: its pointers may be null, which memcpy must not get
  const bool timed = bytes >= kTimedBytes;
  const bool stream = timed && streaming_left_ > 0;
  if (stream) --streaming_left_;
  const bool judged = timed && !stream;  // a plain copy worth timing
  const auto start = judged ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  if (keep != nullptr && !keep_streaming)
    kernels::copy_twice(buffer, keep, src, bytes, stream);
  else if (stream)
    kernels::copy_streaming(buffer, src, bytes);
  else
    std::memcpy(buffer, src, bytes);
  if (judged)
    record_plain(bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  if (keep != nullptr && keep_streaming) kernels::copy_streaming(keep, src, bytes);
}

void StagingCopy::record_plain(size_t bytes, double seconds) {
  if (bytes >= kTimedBytes && static_cast<double>(bytes) < kSlowBytesPerSecond * seconds)
    streaming_left_ = kStreamingCopies;
}

}  // namespace acc::dist
