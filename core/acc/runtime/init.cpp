#include "acc/runtime/init.h"

#include <cstdlib>
#include <exception>
#include <mutex>
#include <vector>

#include "acc/distributed/single_process_group.h"
#include "acc/distributed/traffic.h"
#include "acc/memory/allocator.h"
#include "acc/plugin/registry.h"
#include "acc/runtime/preemption.h"
#include "acc/runtime/threads.h"
#include "acc/util/error.h"
#include "acc/util/log.h"
#include "acc/util/profiler.h"

namespace acc {
namespace {

std::mutex g_mutex;
std::vector<std::function<void()>> g_shutdown_work;  // at_shutdown
std::shared_ptr<dist::ProcessGroup> g_world;
dist::Topology g_topology;
bool g_initialized = false;

// An uncaught exception on one rank must stop every rank: peers blocked in a collective with
// this rank would otherwise wait for their timeout.
[[noreturn]] void terminate_handler() {
  // No std::string: memory may be what ran out. `e` keeps ex.what()'s text alive.
  const std::exception_ptr e = std::current_exception();
  const char* prefix = "";
  const char* what = e ? "unknown exception" : "std::terminate called without an exception";
  if (e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      prefix = error_prefix(ex);
      what = ex.what();
    } catch (...) {
    }
  }
  log::error("uncaught error, aborting the job: {}{}", prefix, what);
  log::logger().flush();
  std::shared_ptr<dist::ProcessGroup> world = g_world;  // no lock: we may hold it already
  if (world) world->abort(1);
  std::abort();
}

std::string backend_name(const dist::Topology& t) {
  if (const char* env = std::getenv("ACC_COMM_BACKEND"); env && *env) return env;
  return t.world_size > 1 ? "mpi" : "single";
}

}  // namespace

void init(int /*argc*/, char** /*argv*/) {
  std::lock_guard lock(g_mutex);
  ACC_CHECK(!g_initialized, "acc::init: called twice; call it once at the start of main");
  log::init();
  g_topology = dist::topology_from_env();
  if (g_topology.world_size > 1) log::set_rank(g_topology.rank, g_topology.world_size);
  std::set_terminate(terminate_handler);
  install_preemption_handler();

  const std::string backend = backend_name(g_topology);
  if (backend == "single") {
    ACC_CHECK(g_topology.world_size == 1, "acc::init: the single-process group cannot serve a ",
              "world of ", g_topology.world_size, " ranks; unset ACC_COMM_BACKEND");
    g_world = std::make_shared<dist::SingleProcessGroup>();
  } else {
    g_world = plugin::Registry::global().make_comm_backend(backend, g_topology);
  }
  ACC_CHECK(g_world->size() == g_topology.world_size && g_world->rank() == g_topology.rank,
            "acc::init: comm backend '", backend, "' reports rank ", g_world->rank(), " of ",
            g_world->size(), " but the environment says rank ", g_topology.rank, " of ",
            g_topology.world_size);
  runtime::set_num_threads(runtime::default_num_threads(g_topology.local_size));
  if (const char* p = std::getenv("ACC_PROFILE"); p && std::string(p) == "1") profiler::enable(true);
  memory::share_cache_among(g_topology.local_size);
  g_initialized = true;
  static const bool registered = (std::atexit(shutdown), true);
  (void)registered;
  log::debug("acc initialised: rank {}/{} (local {}/{}, node {}/{}), backend {}, {} threads",
             g_topology.rank, g_topology.world_size, g_topology.local_rank,
             g_topology.local_size, g_topology.node, g_topology.num_nodes, backend,
             runtime::num_threads());
}

bool initialized() {
  std::lock_guard lock(g_mutex);
  return g_initialized;
}

void at_shutdown(std::function<void()> work) {
  std::lock_guard lock(g_mutex);
  g_shutdown_work.push_back(std::move(work));
}

void shutdown() {
  std::vector<std::function<void()>> work;
  {
    std::lock_guard lock(g_mutex);
    if (g_world) work.swap(g_shutdown_work);
  }
  for (const auto& fn : work) try {
      fn();
    } catch (const std::exception& e) {
      log::error("at shutdown: {}", e.what());
    }
  if (profiler::enabled()) {
    log::info("profile (ACC_PROFILE=1), time in marked ops of this rank's threads:\n{}", profiler::report());
    if (const auto sent = dist::traffic(); sent.total_bytes() > 0)
      log::info("traffic (ACC_PROFILE=1), what this rank's collectives sent under a ring schedule:\n{}",
                sent.describe());
    profiler::enable(false);
  }
  std::shared_ptr<dist::ProcessGroup> world;
  {
    std::lock_guard lock(g_mutex);
    world.swap(g_world);
    g_initialized = false;
  }
  if (world) world->finalize();  // outside the lock: a backend may block while finalizing
}

dist::ProcessGroup& world() { return *world_ptr(); }

std::shared_ptr<dist::ProcessGroup> world_ptr() {
  std::lock_guard lock(g_mutex);
  ACC_CHECK(g_world, "acc::world: acc::init(argc, argv) has not run (or shutdown() has)");
  return g_world;
}

const dist::Topology& topology() {
  std::lock_guard lock(g_mutex);
  ACC_CHECK(g_initialized, "acc::topology: acc::init(argc, argv) has not run");
  return g_topology;
}

}  // namespace acc
