#include "acc/distributed/environment.h"

#include <cstdlib>
#include <string>

#include "acc/util/error.h"

namespace acc::dist {
namespace {

// A set variable must be a whole number in [low, high]; an unset one gives `fallback`.
int int_env(const char* name, int fallback, int low, int high) {
  const char* value = std::getenv(name);
  if (!value || !*value) return fallback;
  char* end = nullptr;
  const long n = std::strtol(value, &end, 10);
  ACC_CHECK(*end == '\0' && n >= low && n <= high, name, "='", value,
            "' is not valid; expected a whole number from ", low, " to ", high);
  return static_cast<int>(n);
}

}  // namespace

std::chrono::duration<double> comm_timeout() {
  const char* value = std::getenv("ACC_COMM_TIMEOUT");
  if (!value || !*value) return std::chrono::duration<double>(600.0);
  char* end = nullptr;
  const double seconds = std::strtod(value, &end);
  ACC_CHECK(*end == '\0' && seconds > 0, "ACC_COMM_TIMEOUT='", value,
            "' is not valid; expected a positive number of seconds");
  return std::chrono::duration<double>(seconds);
}

Topology topology_from_env() {
  Topology t;
  t.world_size = int_env("OMPI_COMM_WORLD_SIZE", 1, 1, 1 << 20);
  t.rank = int_env("OMPI_COMM_WORLD_RANK", 0, 0, t.world_size - 1);
  t.local_size = int_env("OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1, t.world_size);
  t.local_rank = int_env("OMPI_COMM_WORLD_LOCAL_RANK", 0, 0, t.local_size - 1);
  const int per_node = int_env("ACC_RANKS_PER_NODE", 0, 1, t.world_size);
  if (per_node > 0) {
    ACC_CHECK(t.world_size % per_node == 0, "ACC_RANKS_PER_NODE=", per_node,
              " does not divide the world size ", t.world_size,
              "; expected every simulated node to hold the same number of ranks");
    t.local_size = per_node;
    t.local_rank = t.rank % per_node;
  }
  t.node = t.node_of(t.rank);
  t.num_nodes = (t.world_size + t.local_size - 1) / t.local_size;
  return t;
}

}  // namespace acc::dist
