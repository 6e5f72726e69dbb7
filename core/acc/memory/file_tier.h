#pragma once
// The file tier's blocks (see allocator.h): each block is a file created under one directory,
// unlinked at once and mapped shared, so its pages are backed by the disk rather than by swap,
// and no file outlives the process.
#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace acc::memory::file_tier {

// How the tier's files begin (acc-offload-XXXXXX): resident_kinds() finds their mappings by it.
inline constexpr const char* kFilePrefix = "/acc-offload-";

void set_dir(const std::filesystem::path& dir, int64_t reserve_bytes);
// A page-aligned block of nbytes (rounded up to pages), its disk space reserved up front so
// that a full disk is an error here, not a SIGBUS when a page is first written.
void* map(size_t nbytes);
void unmap(void* ptr, size_t nbytes) noexcept;
// Copies [at, at + nbytes) of a mapped block out of its file into dst, or src into it, through
// the file's descriptor: the same bytes as the mapping holds (both are the page cache), without
// mapping a page into the process.
void read(const void* at, size_t nbytes, void* dst);
void write(void* at, size_t nbytes, const void* src);
// Copies nbytes from `from` to `to`, both inside mapped blocks, file to file in the kernel
// (copy_file_range): nothing passes through this process's memory.
void copy(void* to, const void* from, size_t nbytes);
// madvise(MADV_DONTNEED) on the whole pages inside the range: for a shared file mapping the
// data stays in the file and the page cache; the process stops holding the pages.
void page_out(const void* ptr, size_t nbytes) noexcept;
// Sets the range to zeros: its whole pages become holes in the file (madvise MADV_REMOVE), so
// their old contents are dropped from the page cache unwritten and nothing becomes resident;
// the partial pages at the ends, or everything on a file system that cannot punch holes, are
// written with zeros.
void zero(void* ptr, size_t nbytes) noexcept;

}  // namespace acc::memory::file_tier
