#include "shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "acc/util/log.h"

namespace acc::mpi {
namespace {

std::string errno_text() { return std::strerror(errno); }

// Maps the named segment of `bytes`; creates it when `create`. Returns null and sets `error`.
void* map_segment(const std::string& name, size_t bytes, bool create, std::string& error) {
  const int fd = create ? shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600)
                        : shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    error = "shm_open('" + name + "'): " + errno_text();
    return nullptr;
  }
  // Reserved up front, not just sized: a full /dev/shm (containers often give it 64 MB) then
  // fails here, and the group uses MPI messages, instead of raising SIGBUS at first touch.
  if (create) {
    const int rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    if (rc != 0) {
      error = "posix_fallocate('" + name + "', " + std::to_string(bytes) + " bytes): " + std::strerror(rc);
      close(fd);
      shm_unlink(name.c_str());
      return nullptr;
    }
  }
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    error = "mmap('" + name + "', " + std::to_string(bytes) + " bytes): " + errno_text();
    return nullptr;
  }
  return base;
}

}  // namespace

SharedSegment map_shared_segment(MPI_Comm comm, size_t bytes, const char* what,
                                 const std::function<void(void*)>& init) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  // Rank 0 names the segment after its pid and a per-process counter, so groups and jobs on
  // one node never collide, and sends the name to the others.
  static int segments_made = 0;
  char name[64] = {};
  if (rank == 0)
    std::snprintf(name, sizeof name, "/acc-%s-%d-%d", what, static_cast<int>(getpid()), segments_made++);
  std::string error;
  void* base = nullptr;
  if (rank == 0) {
    base = map_segment(name, bytes, true, error);
    if (base != nullptr) init(base);
  }
  int created = base != nullptr ? 1 : 0;
  MPI_Bcast(name, sizeof name, MPI_CHAR, 0, comm);
  MPI_Bcast(&created, 1, MPI_INT, 0, comm);
  if (rank != 0 && created) base = map_segment(name, bytes, false, error);
  int mapped = base != nullptr ? 1 : 0, all_mapped = 0;
  MPI_Allreduce(&mapped, &all_mapped, 1, MPI_INT, MPI_MIN, comm);
  if (rank == 0 && created) shm_unlink(name);  // every rank has it mapped (or gave up)
  if (!error.empty()) log::warn("mpi plugin: no shared-memory {}, using MPI messages: {}", what, error);
  if (!all_mapped) {
    if (base != nullptr) munmap(base, bytes);
    return {};
  }
  return {base, bytes};
}

bool switched_off(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::string(value) == "0";
}

void unmap_shared_segment(const SharedSegment& segment) {
  if (segment.base != nullptr) munmap(segment.base, segment.bytes);
}

}  // namespace acc::mpi
