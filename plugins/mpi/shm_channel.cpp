#include "shm_channel.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "acc/memory/allocator.h"
#include "acc/util/log.h"

namespace acc::mpi {
namespace {

bool shm_disabled() {
  const char* v = std::getenv("ACC_SHM");
  return v != nullptr && std::string(v) == "0";
}

// Whether every rank of comm wants the channel and shares this node with all the others. The
// answer is agreed on (a MIN over ranks), so all take the same path even if ACC_SHM differs.
bool channel_wanted_everywhere(MPI_Comm comm, int size) {
  MPI_Comm local = MPI_COMM_NULL;
  int local_size = 0;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
    MPI_Comm_size(local, &local_size);
    MPI_Comm_free(&local);
  }
  int wanted = local_size == size && !shm_disabled() ? 1 : 0, everywhere = 0;
  MPI_Allreduce(&wanted, &everywhere, 1, MPI_INT, MPI_MIN, comm);
  return everywhere == 1;
}

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

std::unique_ptr<ShmChannel> ShmChannel::create(MPI_Comm comm) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (size < 2 || !channel_wanted_everywhere(comm, size)) return nullptr;
  // Rank 0's choice, so every rank lays the segment out alike.
  uint64_t buffer_bytes = dist::staging_buffer_bytes();
  MPI_Bcast(&buffer_bytes, 1, MPI_UINT64_T, 0, comm);
  const size_t header = sizeof(Counters) * static_cast<size_t>(size);
  const size_t bytes = header + buffer_bytes * kBuffers * static_cast<size_t>(size);

  // Rank 0 names the segment after its pid and a per-process counter, so groups and jobs on
  // one node never collide, and sends the name to the others.
  static int segments_made = 0;
  char name[64] = {};
  if (rank == 0)
    std::snprintf(name, sizeof name, "/acc-shm-%d-%d", static_cast<int>(getpid()), segments_made++);
  std::string error;
  void* base = nullptr;
  if (rank == 0) {
    base = map_segment(name, bytes, true, error);
    if (base != nullptr) new (base) Counters[size];  // zeros, as the fresh segment already is
  }
  int created = base != nullptr ? 1 : 0;
  MPI_Bcast(name, sizeof name, MPI_CHAR, 0, comm);
  MPI_Bcast(&created, 1, MPI_INT, 0, comm);
  if (rank != 0 && created) base = map_segment(name, bytes, false, error);
  int mapped = base != nullptr ? 1 : 0, all_mapped = 0;
  MPI_Allreduce(&mapped, &all_mapped, 1, MPI_INT, MPI_MIN, comm);
  if (rank == 0 && created) shm_unlink(name);  // every rank has it mapped (or gave up)
  if (!error.empty()) log::warn("mpi plugin: no shared-memory channel, using MPI messages: {}", error);
  if (!all_mapped) {
    if (base != nullptr) munmap(base, bytes);
    return nullptr;
  }
  if (rank == 0)
    log::debug("mpi plugin: shared-memory channel for {} ranks, {} KiB staging buffers", size,
               buffer_bytes >> 10);
  return std::unique_ptr<ShmChannel>(new ShmChannel(rank, size, buffer_bytes, base, bytes));
}

// The whole segment is mapped on every rank, so each counts all of it as communication memory.
ShmChannel::ShmChannel(int rank, int size, size_t buffer_bytes, void* base, size_t mapped_bytes)
    : rank_(rank), size_(size), buffer_bytes_(buffer_bytes), base_(base), mapped_bytes_(mapped_bytes) {
  memory::count_external(memory::Category::communication, static_cast<int64_t>(mapped_bytes_));
}

ShmChannel::~ShmChannel() {
  munmap(base_, mapped_bytes_);
  memory::count_external(memory::Category::communication, -static_cast<int64_t>(mapped_bytes_));
}

char* ShmChannel::buffer(int r, uint64_t step) const {
  const size_t header = sizeof(Counters) * static_cast<size_t>(size_);
  const size_t index = static_cast<size_t>(r) * kBuffers + static_cast<size_t>(step % kBuffers);
  return static_cast<char*>(base_) + header + index * buffer_bytes_;
}

uint64_t ShmChannel::enter(const dist::CollectiveSignature& signature) {
  const uint64_t number = ++entered_;
  counters(rank_).signatures[number % 2] = signature;
  counters(rank_).entered.store(number, std::memory_order_release);  // publishes the slot too
  return number;
}

std::vector<int> ShmChannel::behind(std::atomic<uint64_t> Counters::*counter, uint64_t steps) const {
  std::vector<int> late;
  for (int r = 0; r < size_; ++r)
    if (r != rank_ && (counters(r).*counter).load(std::memory_order_acquire) < steps) late.push_back(r);
  return late;
}

}  // namespace acc::mpi
