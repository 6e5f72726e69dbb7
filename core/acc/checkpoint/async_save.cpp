// save_async: the SaveJob of the save in flight, its writing thread, and its commit at the next
// save, load, finish_saves() or acc::shutdown().
#include <sys/resource.h>
#include <unistd.h>

#include <memory>
#include <thread>

#include "acc/checkpoint/checkpoint.h"
#include "acc/checkpoint/layout.h"
#include "acc/checkpoint/save_job.h"
#include "acc/runtime/init.h"
#include "acc/util/log.h"

namespace acc::checkpoint {

namespace {

struct InFlight {
  std::filesystem::path root;
  int keep = 0;
  std::unique_ptr<SaveJob> job;
  std::thread writer;
};

// One save in flight per process. Only the training thread touches it (saves are collectives,
// called by every rank from its training loop).
std::unique_ptr<InFlight> g_in_flight;
bool g_commit_at_shutdown = false;  // at_shutdown work registered for this session

}  // namespace

std::filesystem::path save_async(const std::filesystem::path& root, const TrainingState& state, int keep) {
  finish_saves();
  if (!g_commit_at_shutdown) {
    g_commit_at_shutdown = true;
    at_shutdown([] {
      g_commit_at_shutdown = false;
      if (auto dir = finish_saves()) log::info("committed the asynchronous checkpoint {} at shutdown", dir->string());
    });
  }
  auto flight = std::make_unique<InFlight>();
  flight->root = root;
  flight->keep = keep;
  saving_into(root, [&] {
    flight->job = std::make_unique<SaveJob>(root / step_dir_name(state.position.step), state, /*snapshot=*/true);
  });
  SaveJob* job = flight->job.get();
  flight->writer = std::thread([job] {
    job->copy();  // at the training threads' priority: the next optimizer step waits for it
    // Below them for the write: it takes the CPU time they leave (waits, I/O).
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 10);
    job->write();
  });
  const auto dir = job->dir();
  g_in_flight = std::move(flight);
  return dir;
}

std::optional<std::filesystem::path> finish_saves() {
  if (!g_in_flight) return std::nullopt;
  const std::unique_ptr<InFlight> flight = std::move(g_in_flight);
  flight->writer.join();
  saving_into(flight->root, [&] { flight->job->finish(); });
  point_latest_at(flight->root, flight->job->dir(), flight->keep);
  return flight->job->dir();
}

}  // namespace acc::checkpoint
