// Entry point of the mpi plugin: registers the "mpi" comm backend.
#include <cstdlib>
#include <string>

#include "acc/distributed/environment.h"
#include "acc/util/error.h"
#include "acc/util/log.h"
#include "acc/plugin/plugin_api.h"
#include "acc/plugin/registry.h"
#include "mpi_process_group.h"

namespace {

void register_mpi(acc::plugin::Registry& registry) {
  registry.add_comm_backend("mpi", [](const acc::dist::Topology& topology) {
    // Across machines a reduction can hold the link long enough to delay the next gather, so
    // urgent gathers get a lane of their own; ACC_URGENT_LANE=0 keeps one (to measure it).
    const char* lane = std::getenv("ACC_URGENT_LANE");
    ACC_CHECK(!lane || std::string(lane) == "0" || std::string(lane) == "1", "ACC_URGENT_LANE='", lane,
              "' is not valid; expected 0 or 1");
    const bool two_lanes = topology.num_nodes > 1 && !(lane && std::string(lane) == "0");
    auto engine = std::make_shared<acc::mpi::CommEngine>(acc::dist::comm_timeout(), two_lanes);
    if (engine->sim_link() && engine->world_rank() == 0)
      acc::log::info("cross-node collectives and messages paced to {}", engine->sim_link()->describe());
    return std::shared_ptr<acc::dist::ProcessGroup>(acc::mpi::MpiProcessGroup::world(engine));
  });
}

}  // namespace

ACC_PLUGIN("mpi", register_mpi)
