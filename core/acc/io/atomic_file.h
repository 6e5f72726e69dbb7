#pragma once
// Writing a file so that readers never see it half-written: the bytes go to a temporary file in
// the same directory (so the final rename stays on one file system and is atomic), which is
// renamed over the target only once everything was written and flushed.
#include <filesystem>
#include <functional>
#include <ostream>

namespace acc::io {

// Calls `write` with a stream to a temporary file beside `path`, then renames it to `path`.
// If `write` throws or the stream fails, the temporary file is removed and acc::Error (or the
// original exception) propagates; `path` is left as it was.
void write_file_atomically(const std::filesystem::path& path,
                           const std::function<void(std::ostream&)>& write);

}  // namespace acc::io
