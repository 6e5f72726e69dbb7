#include "shm_mailbox.h"

#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <sstream>
#include <utility>

#include "acc/memory/allocator.h"
#include "acc/util/log.h"
#include "comm_engine.h"

namespace acc::mpi {
namespace {

// The value each rank's probe word holds, so a peer can tell a real read from a lucky one.
uint64_t probe_value(int rank) { return 0xacc0'cafe'0000'0000ULL + static_cast<uint64_t>(rank); }

// Copies `bytes` at `address` in process `pid` to `out`; errno's text on failure.
bool read_from(int pid, uint64_t address, void* out, size_t bytes, std::string& error) {
  size_t done = 0;
  while (done < bytes) {
    iovec local{static_cast<char*>(out) + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(address + done), bytes - done};
    const ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (n <= 0) {
      error = std::string("process_vm_readv: ") + (n == 0 ? "no bytes read" : std::strerror(errno));
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

uint32_t* futex_word(std::atomic<uint32_t>& a) { return reinterpret_cast<uint32_t*>(&a); }

// The world rank of every rank of comm.
std::vector<int> world_ranks_of(MPI_Comm comm, int size) {
  MPI_Group group, world;
  MPI_Comm_group(comm, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  std::vector<int> ranks(static_cast<size_t>(size)), out(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) ranks[static_cast<size_t>(r)] = r;
  MPI_Group_translate_ranks(group, size, ranks.data(), world, out.data());
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  return out;
}

}  // namespace

std::shared_ptr<ShmMailbox> ShmMailbox::create(MPI_Comm comm, CommEngine& engine) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (size < 2 || size > kMaxRanks) return nullptr;
  const size_t lanes = static_cast<size_t>(size) * static_cast<size_t>(size);
  const size_t bytes = sizeof(RankInfo) * static_cast<size_t>(size) + sizeof(Lane) * lanes;
  const SharedSegment segment = map_shared_segment(comm, bytes, "mailbox", [size, lanes](void* base) {
    auto* infos = new (base) RankInfo[size];
    new (infos + size) Lane[lanes];
  });
  if (segment.base == nullptr) return nullptr;
  // Can the ranks read each other's memory? Yama (ptrace_scope 1) allows it only to a process
  // that said so; containers and hardened kernels may forbid it whatever we say.
  const bool wanted = !switched_off("ACC_SHM_P2P");
  if (wanted) prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);  // fails harmlessly without Yama
  static uint64_t probe = 0;  // groups are made one at a time, on the comm thread
  probe = probe_value(rank);
  auto* infos = static_cast<RankInfo*>(segment.base);
  infos[rank].pid = static_cast<int32_t>(getpid());
  infos[rank].probe_address = reinterpret_cast<uint64_t>(&probe);
  MPI_Barrier(comm);
  std::string error;
  int readable = wanted ? 1 : 0, everywhere = 0;
  for (int r = 0; r < size && readable; ++r) {
    uint64_t seen = 0;
    if (r == rank) continue;
    if (!read_from(infos[r].pid, infos[r].probe_address, &seen, sizeof seen, error) || seen != probe_value(r)) {
      if (error.empty()) error = "read a wrong value";
      error = "from rank " + std::to_string(r) + ": " + error;
      readable = 0;
    }
  }
  MPI_Allreduce(&readable, &everywhere, 1, MPI_INT, MPI_MIN, comm);
  if (!everywhere) {
    if (wanted && !readable)
      log::info("mpi plugin: point to point through MPI messages, the ranks cannot read each other's memory ({})",
                error);
    if (wanted) prctl(PR_SET_PTRACER, 0, 0, 0, 0);  // nobody reads this process after all
    unmap_shared_segment(segment);
    return nullptr;
  }
  if (rank == 0) log::debug("mpi plugin: point to point through shared memory for {} ranks", size);
  return std::shared_ptr<ShmMailbox>(new ShmMailbox(engine, segment, rank, size, world_ranks_of(comm, size)));
}

ShmMailbox::ShmMailbox(CommEngine& engine, SharedSegment segment, int rank, int size, std::vector<int> world_ranks)
    : engine_(engine),
      segment_(segment),
      rank_(rank),
      size_(size),
      world_ranks_(std::move(world_ranks)),
      next_seq_(static_cast<size_t>(size), 1) {
  memory::count_external(memory::Category::communication, static_cast<int64_t>(segment_.bytes));
}

ShmMailbox::~ShmMailbox() {
  for (auto* queue : {&sends_, &recvs_})
    for (Pending& p : *queue)
      p.work->mark_failed(p.work->description() + ": its group was destroyed before it finished");
  unmap_shared_segment(segment_);
  memory::count_external(memory::Category::communication, -static_cast<int64_t>(segment_.bytes));
}

ShmMailbox::Lane& ShmMailbox::lane(int from, int to) const {
  auto* lanes = reinterpret_cast<Lane*>(static_cast<RankInfo*>(segment_.base) + size_);
  return lanes[static_cast<size_t>(from) * static_cast<size_t>(size_) + static_cast<size_t>(to)];
}

// A waiter counts itself among the sleepers before it sleeps, and the futex sleeps only while
// the doorbell still holds the value it saw: so a ring that finds no sleeper (seq_cst order)
// came before that check, and the waiter does not sleep through it.
void ShmMailbox::ring(int r) {
  std::atomic<uint32_t>& bell = info(r).doorbell;
  bell.fetch_add(1);
  if (info(r).sleepers.load() > 0) syscall(SYS_futex, futex_word(bell), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void ShmMailbox::enqueue(std::deque<Pending>& queue, Pending p) {
  if (const std::string failed = engine_.broken(); !failed.empty()) {
    p.work->mark_failed(p.work->description() + ": not started because an earlier communication failed: " + failed);
    return;
  }
  std::weak_ptr<ShmMailbox> self = weak_from_this();
  const dist::Work* w = p.work.get();
  p.work->set_runner([self, w] {
    if (auto m = self.lock()) m->wait_for(w);
  });
  p.work->set_poll([self] {
    if (auto m = self.lock()) m->progress();
  });
  {
    std::lock_guard lock(mutex_);
    queue.push_back(std::move(p));
  }
  progress();  // a send is posted now if its lane has room; a receive may find its message
}

void ShmMailbox::send(std::shared_ptr<dist::Work> work, const void* data, size_t bytes, int peer, int tag) {
  enqueue(sends_, Pending{std::move(work), static_cast<char*>(const_cast<void*>(data)), bytes, peer, tag, -1, 0,
                          std::chrono::steady_clock::now()});
}

void ShmMailbox::recv(std::shared_ptr<dist::Work> work, void* data, size_t bytes, int peer, int tag) {
  enqueue(recvs_, Pending{std::move(work), static_cast<char*>(data), bytes, peer, tag, -1, 0,
                          std::chrono::steady_clock::now()});
}

bool ShmMailbox::post(Pending& send) {
  Lane& l = lane(rank_, send.peer);
  for (int i = 0; i < kSlots; ++i) {
    Slot& s = l.slots[i];
    if (s.posted.load(std::memory_order_acquire) != 0) continue;
    s.tag = send.tag;
    s.bytes = send.bytes;
    s.address = reinterpret_cast<uint64_t>(send.data);
    if (send.bytes <= kInline) std::memcpy(s.data, send.data, send.bytes);
    s.seq = send.seq = next_seq_[static_cast<size_t>(send.peer)]++;
    send.slot = i;
    s.posted.store(1, std::memory_order_release);  // publishes the fields above
    l.published.store(send.seq, std::memory_order_release);
    ring(send.peer);
    return true;
  }
  return false;
}

bool ShmMailbox::take(Pending& recv, std::string& error) {
  Lane& l = lane(recv.peer, rank_);
  // Every message up to `published` is posted before it, so the scan sees each of them; one
  // posted during the scan into a slot already passed could hide an earlier one, so later
  // messages wait for the next scan.
  const uint64_t published = l.published.load(std::memory_order_acquire);
  Slot* earliest = nullptr;
  for (Slot& s : l.slots)
    if (s.posted.load(std::memory_order_acquire) == 1 && s.seq <= published && s.tag == recv.tag &&
        (!earliest || s.seq < earliest->seq))
      earliest = &s;
  if (!earliest) return false;
  if (earliest->bytes > recv.bytes) {
    std::ostringstream os;
    os << "the message of " << earliest->bytes << " bytes does not fit the receive buffer of " << recv.bytes
       << " bytes";
    error = os.str();
  } else if (earliest->bytes <= kInline) {
    std::memcpy(recv.data, earliest->data, earliest->bytes);
  } else {
    read_from(info(recv.peer).pid, earliest->address, recv.data, earliest->bytes, error);
  }
  earliest->taken_seq.store(earliest->seq, std::memory_order_release);
  earliest->posted.store(0, std::memory_order_release);
  ring(recv.peer);
  if (!used_) {
    used_ = true;
    log::debug("mpi plugin: a message from rank {} to rank {} went through shared memory", recv.peer, rank_);
  }
  return true;
}

void ShmMailbox::progress() {
  struct Finished {
    std::shared_ptr<dist::Work> work;
    std::string error;     // empty: done
    bool breaks = false;   // a failure of its own (it breaks the engine), not a consequence
  };
  std::vector<Finished> finished;
  bool drain = false;
  {
    std::lock_guard lock(mutex_);
    const auto now = std::chrono::steady_clock::now();
    const auto timeout = engine_.timeout();
    const std::string failed = engine_.broken();
    // False while `p` may go on; else it is failed (a posted send keeps its buffer alive).
    auto give_up = [&](Pending& p, const char* what) {
      if (!failed.empty()) {
        finished.push_back({p.work, p.work->description() + ": not finished because an earlier communication failed: " + failed});
      } else if (now - p.issued >= timeout) {
        std::ostringstream os;
        os << "timed out after " << timeout.count() << " s (ACC_COMM_TIMEOUT): world rank "
           << world_ranks_[static_cast<size_t>(p.peer)] << " has not " << what;
        finished.push_back({p.work, os.str(), true});
      } else {
        return false;
      }
      if (p.slot >= 0 && p.bytes > kInline) abandoned_.push_back(p.work);
      return true;
    };
    // In the order issued: once a send finds its lane full, later ones to that peer wait too,
    // or a slot freed meanwhile would let a later message pass it.
    std::vector<int> full;
    std::erase_if(sends_, [&](Pending& s) {
      if (s.slot < 0 && (std::find(full.begin(), full.end(), s.peer) != full.end() || !post(s))) {
        full.push_back(s.peer);
        return give_up(s, "made room for the message (its lane is full)");
      }
      // A short message left with its slot; a long one is the sender's until taken.
      if (s.bytes <= kInline || lane(rank_, s.peer).slots[s.slot].taken_seq.load(std::memory_order_acquire) >= s.seq) {
        finished.push_back({s.work, ""});
        return true;
      }
      return give_up(s, "received it");
    });
    if (!full.empty() && !draining_) drain = draining_ = true;
    // In the order posted: a receive that finds no message holds back later ones for the same
    // peer and tag, so messages of one tag are taken in the order they were sent.
    std::vector<std::pair<int, int>> blocked;
    std::erase_if(recvs_, [&](Pending& r) {
      const std::pair<int, int> key{r.peer, r.tag};
      if (failed.empty() && std::find(blocked.begin(), blocked.end(), key) == blocked.end()) {
        std::string error;
        if (take(r, error)) {
          finished.push_back({r.work, error, !error.empty()});
          return true;
        }
        blocked.push_back(key);
      }
      return give_up(r, "sent it");
    });
  }
  for (Finished& f : finished) {
    if (f.error.empty())
      f.work->mark_done();
    else if (f.breaks)
      engine_.fail_work(*f.work, f.error);
    else
      f.work->mark_failed(f.error);
  }
  if (drain) drain_in_background();
}

std::vector<int> ShmMailbox::unposted_peers() {
  std::lock_guard lock(mutex_);
  std::vector<int> peers;
  for (const Pending& s : sends_)
    if (s.slot < 0 && std::find(peers.begin(), peers.end(), s.peer) == peers.end()) peers.push_back(s.peer);
  if (peers.empty()) draining_ = false;
  return peers;
}

void ShmMailbox::drain_in_background() {
  Schedule schedule;
  std::weak_ptr<ShmMailbox> self = weak_from_this();
  schedule.rounds.push_back(Round{{}, [self] {
    auto m = self.lock();
    if (!m) return std::vector<int>{};
    m->progress();
    return m->unposted_peers();
  }, {}});
  auto work = std::make_shared<dist::Work>("point-to-point sends waiting for room in the shared-memory mailbox");
  engine_.submit(Task{false, MPI_COMM_NULL, 0, world_ranks_, std::move(work), std::move(schedule)});
}

bool ShmMailbox::pending(const dist::Work* work) {
  std::lock_guard lock(mutex_);
  auto is = [&](const Pending& p) { return p.work.get() == work; };
  return std::any_of(sends_.begin(), sends_.end(), is) || std::any_of(recvs_.begin(), recvs_.end(), is);
}

void ShmMailbox::wait_for(const dist::Work* work) {
  // Briefly by polling (a neighbour's message is often on its way), then asleep on the doorbell
  // in slices, so that timeouts and a broken engine are noticed (progress() fails what is
  // pending then).
  const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
  std::atomic<uint32_t>& bell = info(rank_).doorbell;
  for (;;) {
    const uint32_t rung = bell.load(std::memory_order_acquire);
    progress();
    if (!pending(work)) return;
    if (std::chrono::steady_clock::now() < spin_until) {
      // Watching the doorbell costs no system call (each one is a trip through the hypervisor
      // in a paravirtualised guest); a ring ends the spin at once.
      while (bell.load(std::memory_order_acquire) == rung && std::chrono::steady_clock::now() < spin_until)
        _mm_pause();
      continue;
    }
    const timespec slice{0, 50'000'000};
    info(rank_).sleepers.fetch_add(1);
    syscall(SYS_futex, futex_word(bell), FUTEX_WAIT, rung, &slice, nullptr, 0);
    info(rank_).sleepers.fetch_sub(1);
  }
}

}  // namespace acc::mpi
