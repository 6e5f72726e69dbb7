// Entry point of the mpi plugin: registers the "mpi" comm backend.
#include "acc/distributed/environment.h"
#include "acc/util/log.h"
#include "acc/plugin/plugin_api.h"
#include "acc/plugin/registry.h"
#include "mpi_process_group.h"

namespace {

void register_mpi(acc::plugin::Registry& registry) {
  registry.add_comm_backend("mpi", [](const acc::dist::Topology&) {
    auto engine = std::make_shared<acc::mpi::CommEngine>(acc::dist::comm_timeout());
    if (engine->sim_link() && engine->world_rank() == 0)
      acc::log::info("cross-node collectives paced to {}", engine->sim_link()->describe());
    return std::shared_ptr<acc::dist::ProcessGroup>(acc::mpi::MpiProcessGroup::world(engine));
  });
}

}  // namespace

ACC_PLUGIN("mpi", register_mpi)
