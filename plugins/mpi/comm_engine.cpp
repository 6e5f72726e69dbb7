#include "comm_engine.h"

#include <sched.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <optional>
#include <set>
#include <sstream>

#include "acc/util/error.h"
#include "acc/util/log.h"
#include "acc/util/profiler.h"

namespace acc::mpi {
namespace {

// MPI counts are int: larger messages go as several pieces of this size, which MPI's
// non-overtaking rule keeps in order.
constexpr size_t kMaxPiece = size_t{1} << 30;

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, len);
}

void check_mpi(int code, const char* what) {
  ACC_CHECK(code == MPI_SUCCESS, what, " failed: ", mpi_error(code));
}

}  // namespace

struct CommEngine::Active {
  explicit Active(Task t) : task(std::move(t)) {}
  Task task;
  size_t round = 0;  // the round whose messages are in flight
  std::vector<MPI_Request> requests;     // the current round's
  std::vector<const Message*> messages;  // the message behind each request
  std::vector<MPI_Request> detached;     // detached sends of all rounds so far
  std::vector<const Message*> detached_messages;
  std::chrono::steady_clock::time_point started;
};

CommEngine::CommEngine(std::chrono::duration<double> timeout, bool two_lanes)
    : timeout_(timeout), sim_link_(sim_link_from_environment()), two_lanes_(two_lanes) {
  thread_ = std::thread([this] { thread_main(); });
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return init_done_; });
  if (!init_error_.empty()) {
    lock.unlock();
    thread_.join();
    ACC_FAIL("mpi plugin: ", init_error_);
  }
}

void CommEngine::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  std::lock_guard join_lock(join_mutex_);
  if (thread_.joinable() && std::this_thread::get_id() != thread_.get_id()) thread_.join();
}

void CommEngine::submit(Task task) {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) {
      task.work->mark_failed(task.work->description() +
                             ": the mpi backend has been shut down (acc::shutdown)");
      return;
    }
    queue_.push_back(std::move(task));
    queued_.store(static_cast<int>(queue_.size()), std::memory_order_release);
  }
  cv_.notify_all();
}

void CommEngine::abort(int exit_code) {
  if (std::this_thread::get_id() == thread_.get_id()) MPI_Abort(MPI_COMM_WORLD, exit_code);
  abort_code_ = exit_code;
  cv_.notify_all();
  // The comm thread calls MPI_Abort, which ends this process; if it cannot, exit anyway.
  std::this_thread::sleep_for(std::chrono::seconds(10));
  std::_Exit(exit_code);
}

std::string CommEngine::broken() const {
  std::lock_guard lock(failure_mutex_);
  return broken_;
}

void CommEngine::run_here(const dist::Work* work) {
  std::optional<Active> a;
  {
    std::lock_guard lock(mutex_);
    if (collectives_taken_.load(std::memory_order_acquire) > 0 || stopping_) return;
    const auto next = std::find_if(queue_.begin(), queue_.end(), [](const Task& t) { return t.collective; });
    if (next == queue_.end() || next->work.get() != work || !next->any_thread) return;
    if (!broken().empty()) return;  // the comm thread fails it with the reason
    a.emplace(std::move(*next));
    queue_.erase(next);
    queued_.store(static_cast<int>(queue_.size()), std::memory_order_release);
    running_here_.store(true, std::memory_order_release);
  }
  try {
    start(*a);
    while (!progress(*a)) sched_yield();
  } catch (const std::exception& e) {
    fail(*a, e.what());
  }
  running_here_.store(false, std::memory_order_release);
}

void CommEngine::fail(Active& a, const std::string& reason) { fail_work(*a.task.work, reason); }

void CommEngine::fail_work(dist::Work& work, const std::string& reason) {
  const std::string message = work.description() + ": " + reason;
  {
    std::lock_guard lock(failure_mutex_);
    if (broken_.empty()) broken_ = message;
  }
  log::error("{}", message);
  work.mark_failed(message);
}

void CommEngine::post_round(Active& a) {
  a.requests.clear();
  a.messages.clear();
  const Round& round = a.task.schedule.rounds[a.round];
  const int tag = a.task.collective ? a.task.lane : a.task.tag;
  for (const Message& m : round.messages) {
    size_t done = 0;
    do {  // at least one request, so empty messages still synchronise
      const size_t piece = std::min(kMaxPiece, m.bytes - done);
      MPI_Request request;
      char* data = static_cast<char*>(m.data) + done;
      const int count = static_cast<int>(piece);
      const int rc = m.send ? MPI_Isend(data, count, MPI_BYTE, m.peer, tag, a.task.comm, &request)
                            : MPI_Irecv(data, count, MPI_BYTE, m.peer, tag, a.task.comm, &request);
      check_mpi(rc, m.send ? "MPI_Isend" : "MPI_Irecv");
      (m.detached ? a.detached : a.requests).push_back(request);
      (m.detached ? a.detached_messages : a.messages).push_back(&m);
      done += piece;
    } while (done < m.bytes);
  }
}

void CommEngine::start(Active& a) {
  a.started = std::chrono::steady_clock::now();
  if (a.task.schedule.before) a.task.schedule.before();
  if (!a.task.schedule.rounds.empty()) post_round(a);
}

bool CommEngine::progress(Active& a) {
  for (;;) {
    // During the rounds, wait for the current round; after them, for the detached sends.
    const bool in_rounds = a.round < a.task.schedule.rounds.size();
    auto& requests = in_rounds ? a.requests : a.detached;
    int flag = 1;  // no MPI call without requests: run_here runs those off the comm thread
    if (!requests.empty())
      check_mpi(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &flag,
                            MPI_STATUSES_IGNORE),
                "MPI_Testall");
    if (flag && in_rounds) {
      const auto& waiting_on = a.task.schedule.rounds[a.round].waiting_on;
      flag = !waiting_on || waiting_on().empty();
    }
    if (!flag) {
      if (std::chrono::steady_clock::now() - a.started < timeout_) return false;
      fail_timed_out(a);
      return true;
    }
    if (!in_rounds) break;
    if (const auto& after = a.task.schedule.rounds[a.round].after) after();
    if (++a.round < a.task.schedule.rounds.size()) post_round(a);
  }
  // All the communication time, hidden by compute or not (comm.wait is the part that was not).
  if (a.task.collective && profiler::enabled())
    profiler::add("comm.collective", std::chrono::duration<double>(std::chrono::steady_clock::now() - a.started).count(),
                  /*alongside=*/true);
  a.task.work->mark_done();
  return true;
}

void CommEngine::fail_timed_out(Active& a) {
  // The peers behind the requests still open are, as far as this rank can know, the ranks
  // that have not arrived.
  std::set<int> missing;
  auto collect = [&](std::vector<MPI_Request>& requests, const std::vector<const Message*>& ms) {
    for (size_t i = 0; i < requests.size(); ++i) {
      int done = 0;
      if (requests[i] != MPI_REQUEST_NULL) MPI_Test(&requests[i], &done, MPI_STATUS_IGNORE);
      if (!done && requests[i] != MPI_REQUEST_NULL)
        missing.insert(a.task.world_ranks[ms[i]->peer]);
    }
  };
  if (a.round < a.task.schedule.rounds.size()) {
    collect(a.requests, a.messages);
    if (const auto& waiting_on = a.task.schedule.rounds[a.round].waiting_on)
      for (int peer : waiting_on()) missing.insert(a.task.world_ranks[peer]);
  }
  collect(a.detached, a.detached_messages);
  std::ostringstream os;
  os << "timed out after " << timeout_.count() << " s (ACC_COMM_TIMEOUT) in round "
     << std::min(a.round + 1, a.task.schedule.rounds.size()) << " of "
     << a.task.schedule.rounds.size()
     << "; ranks that have not arrived (peers this rank is still waiting on, world ranks): [";
  int i = 0;
  for (int r : missing) os << (i++ ? ", " : "") << r;
  os << "]";
  fail(a, os.str());
  // MPI may still write into the scratch buffers of the abandoned requests: never reuse.
  std::lock_guard lock(failure_mutex_);
  for (auto& buffer : a.task.schedule.scratch) abandoned_.push_back(std::move(buffer));
}

void CommEngine::thread_main() {
  try {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided),
                "MPI_Init_thread");
      we_initialized_mpi_ = true;
    }
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &coll_comm_), "MPI_Comm_dup");
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &p2p_comm_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(coll_comm_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(p2p_comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(coll_comm_, &world_rank_);
    MPI_Comm_size(coll_comm_, &world_size_);
    world_shm_ = ShmChannel::create(coll_comm_);
    // Choices every rank must make alike: a rank alone in its choice would hang its peers.
    int wanted[2] = {dist::signature_check_enabled() ? 1 : 0, two_lanes_ ? 1 : 0}, everywhere[2] = {0, 0};
    check_mpi(MPI_Allreduce(wanted, everywhere, 2, MPI_INT, MPI_MIN, coll_comm_), "MPI_Allreduce");
    check_signatures_ = everywhere[0] == 1;
    two_lanes_ = everywhere[1] == 1;
    if (two_lanes_ && world_shm_) world_urgent_shm_ = ShmChannel::create(coll_comm_);
    if (world_shm_) world_mailbox_ = ShmMailbox::create(coll_comm_, *this);
  } catch (const std::exception& e) {
    init_error_ = e.what();
  }
  {
    std::lock_guard lock(mutex_);
    init_done_ = true;
  }
  cv_.notify_all();
  if (!init_error_.empty()) return;

  std::vector<std::unique_ptr<Active>> active;
  // Starts a task; false if it failed at once (and is already reported).
  auto launch = [&](Task task) {
    active.push_back(std::make_unique<Active>(std::move(task)));
    try {
      start(*active.back());
      return true;
    } catch (const std::exception& e) {
      fail(*active.back(), e.what());
      active.pop_back();
      return false;
    }
  };
  // Per lane: collectives not yet started, in submission order, and whether one is running.
  std::deque<Task> waiting[2];
  bool collective_running[2] = {false, false};
  auto nothing_waiting = [&] { return waiting[0].empty() && waiting[1].empty(); };
  for (;;) {
    std::deque<Task> incoming;
    if (active.empty() && nothing_waiting()) {
      // Idle: poll briefly before sleeping, since the next collective often follows at once
      // (a step issues them back to back) and waking a sleeping thread costs microseconds.
      const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(20);
      while (queued_.load(std::memory_order_acquire) == 0 &&
             std::chrono::steady_clock::now() < spin_until)
        sched_yield();
    }
    {
      std::unique_lock lock(mutex_);
      if (active.empty() && nothing_waiting())
        cv_.wait(lock, [&] { return !queue_.empty() || stopping_ || abort_code_ >= 0; });
      incoming.swap(queue_);
      queued_.store(0, std::memory_order_release);
      collectives_taken_.fetch_add(
          static_cast<int>(std::count_if(incoming.begin(), incoming.end(), [](const Task& t) { return t.collective; })),
          std::memory_order_release);
      if (abort_code_ >= 0) MPI_Abort(MPI_COMM_WORLD, abort_code_);
      if (stopping_ && incoming.empty() && active.empty() && nothing_waiting() &&
          !running_here_.load(std::memory_order_acquire))
        break;
    }
    // Once a communication failed, nothing queued starts: each task fails at once with the
    // first failure, instead of waiting out a timeout of its own behind the missing peer.
    auto fail_unstarted = [&](Task& task, const std::string& failed) {
      if (task.collective) collectives_taken_.fetch_sub(1, std::memory_order_release);
      task.work->mark_failed(task.work->description() +
                             ": not started because an earlier communication failed: " + failed);
    };
    if (const std::string failed = broken(); !failed.empty()) {
      for (auto& lane : waiting) {
        for (Task& task : lane) fail_unstarted(task, failed);
        lane.clear();
      }
    }
    for (Task& task : incoming) {
      if (const std::string failed = broken(); !failed.empty()) {
        fail_unstarted(task, failed);
      } else if (task.collective) {
        waiting[task.lane].push_back(std::move(task));
      } else {
        launch(std::move(task));
      }
    }
    // Not while a waiting thread runs one: the collectives here were submitted after it.
    for (int lane = 0; lane < 2; ++lane)
      if (!collective_running[lane] && !waiting[lane].empty() && !running_here_.load(std::memory_order_acquire)) {
        collective_running[lane] = launch(std::move(waiting[lane].front()));
        if (!collective_running[lane]) collectives_taken_.fetch_sub(1, std::memory_order_release);
        waiting[lane].pop_front();
      }
    bool finished_any = false;
    for (auto it = active.begin(); it != active.end();) {
      bool finished = true;
      try {
        finished = progress(**it);
      } catch (const std::exception& e) {
        fail(**it, e.what());
      }
      if (finished) {
        if ((*it)->task.collective) {
          collective_running[(*it)->task.lane] = false;
          collectives_taken_.fetch_sub(1, std::memory_order_release);
        }
        it = active.erase(it);
        finished_any = true;
      } else {
        ++it;
      }
    }
    // Polling: give the core to the computing threads while peers are still on their way.
    if (!finished_any) sched_yield();
  }

  if (!broken().empty()) {
    log::error("mpi plugin: aborting the job at shutdown after a failed communication");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Comm_free(&coll_comm_);
  MPI_Comm_free(&p2p_comm_);
  if (we_initialized_mpi_) MPI_Finalize();
}

}  // namespace acc::mpi
