#include "mpi_process_group.h"

#include <algorithm>
#include <tuple>

#include "acc/util/error.h"
#include "quantized_schedule.h"
#include "signature_check.h"

namespace acc::mpi {

std::shared_ptr<MpiProcessGroup> MpiProcessGroup::world(std::shared_ptr<CommEngine> engine) {
  std::vector<int> ranks(engine->world_size());
  for (int i = 0; i < engine->world_size(); ++i) ranks[i] = i;
  const int rank = engine->world_rank();
  const MPI_Comm coll = engine->world_collective_comm(), p2p = engine->world_p2p_comm();
  auto shm = engine->world_shm(), urgent_shm = engine->world_urgent_shm();
  auto mailbox = engine->world_mailbox();
  return std::make_shared<MpiProcessGroup>(std::move(engine), "world", std::move(ranks), rank,
                                           coll, p2p, std::move(shm), std::move(urgent_shm), std::move(mailbox));
}

MpiProcessGroup::MpiProcessGroup(std::shared_ptr<CommEngine> engine, std::string name,
                                 std::vector<int> world_ranks, int rank, MPI_Comm collective_comm,
                                 MPI_Comm p2p_comm, std::shared_ptr<ShmChannel> shm,
                                 std::shared_ptr<ShmChannel> urgent_shm, std::shared_ptr<ShmMailbox> mailbox)
    : ProcessGroup(std::move(name), std::move(world_ranks)),
      engine_(std::move(engine)),
      rank_(rank),
      coll_comm_(collective_comm),
      p2p_comm_(p2p_comm),
      shm_(std::move(shm)),
      urgent_shm_(std::move(urgent_shm)),
      mailbox_(std::move(mailbox)) {}

void MpiProcessGroup::submit_collective(std::shared_ptr<dist::Work> work, Schedule schedule,
                                        bool any_thread, int lane) {
  if (engine_->check_signatures() && work->signature() && size() > 1) {
    const auto& channel = lane == 0 ? shm_ : urgent_shm_;
    Schedule checked = channel ? shm_signature_check_schedule(channel, *work->signature(), world_ranks())
                               : signature_check_schedule(rank_, size(), *work->signature(), world_ranks());
    checked.append(std::move(schedule));
    schedule = std::move(checked);
  }
  if (span() == dist::Span::cross_node && engine_->sim_link())
    pace(schedule, *engine_->sim_link(), engine_->link_clock(), work->wire_bytes(), rank_);
  if (any_thread)  // the thread that waits may run it (CommEngine::run_here)
    work->set_runner([engine = std::weak_ptr<CommEngine>(engine_), w = work.get()] {
      if (auto e = engine.lock()) e->run_here(w);
    });
  engine_->submit(Task{true, coll_comm_, 0, world_ranks(), std::move(work), std::move(schedule), any_thread, lane});
}

void MpiProcessGroup::submit_p2p(std::shared_ptr<dist::Work> work, Message message, int tag) {
  Schedule schedule;
  schedule.rounds.push_back(Round{{message}, {}, {}});
  if (!message.send && engine_->sim_link() && span_to(message.peer) == dist::Span::cross_node)
    pace_arrival(schedule, *engine_->sim_link(), engine_->link_clock(), message.bytes, rank_);
  engine_->submit(Task{false, p2p_comm_, tag, world_ranks(), std::move(work), std::move(schedule)});
}

Schedule MpiProcessGroup::gather_schedule(dist::Buffer input, dist::Buffer output,
                                          const std::vector<int64_t>& counts) {
  return shm_ ? shm_all_gather_schedule(shm_, input, output, counts)
              : all_gather_schedule(rank_, size(), input, output, counts);
}

Schedule MpiProcessGroup::scatter_schedule(dist::Buffer input, dist::Buffer output,
                                           const std::vector<int64_t>& counts, dist::ReduceOp op) {
  ScratchPool& scratch = engine_->scratch();
  return shm_ ? shm_reduce_scatter_schedule(shm_, input, output, counts, op, scratch)
              : reduce_scatter_schedule(rank_, size(), input, output, counts, op, scratch);
}

void MpiProcessGroup::do_all_gather(std::shared_ptr<dist::Work> work, dist::Buffer input,
                                    dist::Buffer output, std::vector<int64_t> counts, dist::Lane lane) {
  if (lane == dist::Lane::urgent && engine_->two_lanes() && size() > 1) {
    submit_collective(std::move(work),
                      urgent_shm_ ? shm_all_gather_schedule(urgent_shm_, input, output, counts)
                                  : all_gather_schedule(rank_, size(), input, output, counts),
                      false, 1);
    return;
  }
  submit_collective(std::move(work), gather_schedule(input, output, counts), shm_ != nullptr);
}

void MpiProcessGroup::do_reduce_scatter(std::shared_ptr<dist::Work> work, dist::Buffer input,
                                        dist::Buffer output, std::vector<int64_t> counts,
                                        dist::ReduceOp op, dist::ReduceWire wire) {
  if (wire.quantized() && size() > 1) {
    submit_collective(std::move(work),
                      quantized_reduce_scatter_schedule(rank_, size(), input, output, counts, op, wire,
                                                        engine_->scratch()),
                      false);
    return;
  }
  submit_collective(std::move(work), scatter_schedule(input, output, counts, op), shm_ != nullptr);
}

// Reduce-scatter into this rank's own chunk of the tensor, then gather every chunk in place.
void MpiProcessGroup::do_all_reduce(std::shared_ptr<dist::Work> work, dist::Buffer tensor,
                                    dist::ReduceOp op, dist::ReduceWire wire) {
  if (wire.quantized() && size() > 1) {
    submit_collective(std::move(work),
                      quantized_all_reduce_schedule(rank_, size(), tensor, op, wire, engine_->scratch()),
                      false);
    return;
  }
  const auto counts = even_counts(tensor.numel, size());
  const auto offsets = byte_offsets(counts, tensor.dtype);
  const dist::Buffer own{byte_at(tensor.data, offsets[rank_]), counts[rank_], tensor.dtype};
  Schedule schedule = scatter_schedule(tensor, own, counts, op);
  schedule.append(gather_schedule(own, tensor, counts));
  submit_collective(std::move(work), std::move(schedule), shm_ != nullptr);
}

void MpiProcessGroup::do_broadcast(std::shared_ptr<dist::Work> work, dist::Buffer tensor,
                                   int root) {
  submit_collective(std::move(work),
                    shm_ ? shm_broadcast_schedule(shm_, tensor, root) : broadcast_schedule(rank_, size(), tensor, root),
                    shm_ != nullptr);
}

void MpiProcessGroup::do_barrier(std::shared_ptr<dist::Work> work) {
  submit_collective(std::move(work), shm_ ? shm_barrier_schedule(shm_) : barrier_schedule(rank_, size()),
                    shm_ != nullptr);
}

// A peer on another (simulated) node stays on MPI messages even when the group has a mailbox:
// those are what the simulated link paces.
void MpiProcessGroup::do_send(std::shared_ptr<dist::Work> work, dist::Buffer tensor, int peer,
                              int tag) {
  if (mailbox_ && span_to(peer) == dist::Span::node)
    mailbox_->send(std::move(work), tensor.data, tensor.nbytes(), peer, tag);
  else
    submit_p2p(std::move(work), Message{peer, true, tensor.data, tensor.nbytes()}, tag);
}

void MpiProcessGroup::do_recv(std::shared_ptr<dist::Work> work, dist::Buffer tensor, int peer,
                              int tag) {
  if (mailbox_ && span_to(peer) == dist::Span::node)
    mailbox_->recv(std::move(work), tensor.data, tensor.nbytes(), peer, tag);
  else
    submit_p2p(std::move(work), Message{peer, false, tensor.data, tensor.nbytes()}, tag);
}

// Every rank's (color, key) is gathered first through our own all_gather, so a missing rank
// times out with a clear message; the blocking MPI_Comm_split that follows then finds all
// ranks present. Members are ordered by (key, rank) here and MPI is given that order.
std::shared_ptr<dist::ProcessGroup> MpiProcessGroup::do_split(int color, int key,
                                                              std::string name) {
  const int p = size();
  auto mine = std::make_shared<std::vector<int32_t>>(std::vector<int32_t>{color, key});
  auto all = std::make_shared<std::vector<int32_t>>(2 * p);
  struct Result {
    std::vector<int> world_ranks;
    int rank = -1;
    MPI_Comm coll = MPI_COMM_NULL, p2p = MPI_COMM_NULL;
    std::shared_ptr<ShmChannel> shm, urgent_shm;
    std::shared_ptr<ShmMailbox> mailbox;
  };
  auto result = std::make_shared<Result>();

  Schedule schedule = all_gather_schedule(rank_, p, dist::Buffer{mine->data(), 2, DType::i32},
                                          dist::Buffer{all->data(), 2 * p, DType::i32},
                                          std::vector<int64_t>(p, 2));
  Schedule split;
  split.before = [this, all, result, color, p] {
    std::vector<std::tuple<int, int>> members;  // (key, group rank) with this color
    for (int r = 0; r < p; ++r)
      if (color >= 0 && (*all)[2 * r] == color) members.emplace_back((*all)[2 * r + 1], r);
    std::sort(members.begin(), members.end());
    int position = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      const int r = std::get<1>(members[i]);
      result->world_ranks.push_back(world_ranks()[r]);
      if (r == rank_) position = result->rank = static_cast<int>(i);
    }
    const int mpi_color = color >= 0 ? color : MPI_UNDEFINED;
    ACC_CHECK(MPI_Comm_split(coll_comm_, mpi_color, position, &result->coll) == MPI_SUCCESS,
              "split: MPI_Comm_split failed");
    ACC_CHECK(MPI_Comm_split(p2p_comm_, mpi_color, position, &result->p2p) == MPI_SUCCESS,
              "split: MPI_Comm_split failed");
    if (result->coll != MPI_COMM_NULL) {
      MPI_Comm_set_errhandler(result->coll, MPI_ERRORS_RETURN);
      MPI_Comm_set_errhandler(result->p2p, MPI_ERRORS_RETURN);
      result->shm = ShmChannel::create(result->coll);
      if (result->shm && engine_->two_lanes()) result->urgent_shm = ShmChannel::create(result->coll);
      if (result->shm) result->mailbox = ShmMailbox::create(result->coll, *engine_);
    }
  };
  schedule.append(std::move(split));
  auto work = std::make_shared<dist::Work>("split into '" + name + "' of " + describe());
  submit_collective(work, std::move(schedule), /*any_thread=*/false);  // MPI_Comm_split
  work->wait();
  if (color < 0) return nullptr;
  return std::make_shared<MpiProcessGroup>(engine_, std::move(name), result->world_ranks,
                                           result->rank, result->coll, result->p2p, result->shm,
                                           result->urgent_shm, result->mailbox);
}

}  // namespace acc::mpi
