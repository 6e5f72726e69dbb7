#include "acc/distributed/environment.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "error_matchers.h"

namespace {
// Sets variables for one test and unsets them afterwards.
struct Env {
  std::vector<std::string> names;
  Env(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (auto [k, v] : vars) {
      setenv(k, v, 1);
      names.push_back(k);
    }
  }
  ~Env() {
    for (auto& n : names) unsetenv(n.c_str());
  }
};
}  // namespace

TEST(Environment, TopologyFromOpenMpiVariables) {
  Env env{{"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"},
          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}};
  const auto t = acc::dist::topology_from_env();
  EXPECT_EQ(t.rank, 5);
  EXPECT_EQ(t.world_size, 8);
  EXPECT_EQ(t.local_rank, 1);
  EXPECT_EQ(t.local_size, 4);
  EXPECT_EQ(t.node, 1);
  EXPECT_EQ(t.num_nodes, 2);
}

TEST(Environment, RanksPerNodeSimulatesNodes) {
  Env env{{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"},
          {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
          {"ACC_RANKS_PER_NODE", "2"}};
  const auto t = acc::dist::topology_from_env();
  EXPECT_EQ(t.local_rank, 1);
  EXPECT_EQ(t.local_size, 2);
  EXPECT_EQ(t.node, 1);
  EXPECT_EQ(t.num_nodes, 2);
}

TEST(Environment, SingleProcessWithoutVariables) {
  const auto t = acc::dist::topology_from_env();
  EXPECT_EQ(t.rank, 0);
  EXPECT_EQ(t.world_size, 1);
  EXPECT_EQ(t.num_nodes, 1);
}

TEST(Environment, BadValuesAreNamed) {
  {
    Env env{{"OMPI_COMM_WORLD_SIZE", "4"}, {"ACC_RANKS_PER_NODE", "3"}};
    EXPECT_ACC_ERROR(acc::dist::topology_from_env(), {"ACC_RANKS_PER_NODE=3", "world size 4"});
  }
  {
    Env env{{"ACC_COMM_TIMEOUT", "soon"}};
    EXPECT_ACC_ERROR(acc::dist::comm_timeout(), {"ACC_COMM_TIMEOUT='soon'", "positive number"});
  }
  {
    Env env{{"ACC_COMM_TIMEOUT", "2.5"}};
    EXPECT_DOUBLE_EQ(acc::dist::comm_timeout().count(), 2.5);
  }
  EXPECT_DOUBLE_EQ(acc::dist::comm_timeout().count(), 600.0);
}
