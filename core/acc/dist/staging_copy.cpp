#include "acc/dist/staging_copy.h"

#include <chrono>
#include <cstring>

#include "acc/dist/reduce_kernels.h"

namespace acc::dist {

void StagingCopy::operator()(void* dst, const void* src, size_t bytes) {
  if (bytes < kTimedBytes) {
    std::memcpy(dst, src, bytes);
  } else if (streaming_left_ > 0) {
    --streaming_left_;
    kernels::copy_streaming(dst, src, bytes);
  } else {
    const auto start = std::chrono::steady_clock::now();
    std::memcpy(dst, src, bytes);
    record_plain(bytes, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
}

void StagingCopy::record_plain(size_t bytes, double seconds) {
  if (bytes >= kTimedBytes && static_cast<double>(bytes) < kSlowBytesPerSecond * seconds)
    streaming_left_ = kStreamingCopies;
}

}  // namespace acc::dist
