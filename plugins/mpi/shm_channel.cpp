#include "shm_channel.h"

#include <new>

#include "acc/memory/allocator.h"
#include "acc/util/log.h"
#include "shm_segment.h"

namespace acc::mpi {
namespace {

// Whether every rank of comm wants the channel and shares this node with all the others. The
// answer is agreed on (a MIN over ranks), so all take the same path even if ACC_SHM differs.
bool channel_wanted_everywhere(MPI_Comm comm, int size) {
  MPI_Comm local = MPI_COMM_NULL;
  int local_size = 0;
  if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
    MPI_Comm_size(local, &local_size);
    MPI_Comm_free(&local);
  }
  int wanted = local_size == size && !switched_off("ACC_SHM") ? 1 : 0, everywhere = 0;
  MPI_Allreduce(&wanted, &everywhere, 1, MPI_INT, MPI_MIN, comm);
  return everywhere == 1;
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

  const SharedSegment segment = map_shared_segment(comm, bytes, "channel", [size](void* base) {
    new (base) Counters[size];  // zeros, as the fresh segment already is
  });
  if (segment.base == nullptr) return nullptr;
  if (rank == 0)
    log::debug("mpi plugin: shared-memory channel for {} ranks, {} KiB staging buffers", size,
               buffer_bytes >> 10);
  return std::unique_ptr<ShmChannel>(new ShmChannel(rank, size, buffer_bytes, segment.base, bytes));
}

// The whole segment is mapped on every rank, so each counts all of it as communication memory.
ShmChannel::ShmChannel(int rank, int size, size_t buffer_bytes, void* base, size_t mapped_bytes)
    : rank_(rank), size_(size), buffer_bytes_(buffer_bytes), base_(base), mapped_bytes_(mapped_bytes) {
  memory::count_external(memory::Category::communication, static_cast<int64_t>(mapped_bytes_));
}

ShmChannel::~ShmChannel() {
  unmap_shared_segment({base_, mapped_bytes_});
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
