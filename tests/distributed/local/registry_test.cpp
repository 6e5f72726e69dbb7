#include "acc/plugin/registry.h"
#include "acc/plugin/plugin_api.h"

#include "acc/accelerate/auto_strategy.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "error_matchers.h"

namespace fs = std::filesystem;
using acc::plugin::Registry;

namespace {

std::string plugin_file(const std::string& name) {
  return std::string(ACC_TEST_PLUGIN_DIR) + "/" + name + "/" + Registry::file_name(name);
}

// Sets ACC_PLUGIN_PATH for one test and restores "unset" afterwards.
struct PluginPath {
  explicit PluginPath(const std::string& value) { setenv("ACC_PLUGIN_PATH", value.c_str(), 1); }
  ~PluginPath() { unsetenv("ACC_PLUGIN_PATH"); }
};

}  // namespace

TEST(Registry, ThirdPartyStrategyIsFoundThroughPluginPathAndUsedByName) {
  PluginPath path(std::string(ACC_TEST_PLUGIN_DIR) + "/third_party");
  Registry registry;
  auto strategy = registry.make_strategy("third_party_mirror");
  ASSERT_TRUE(strategy);
  EXPECT_EQ(strategy->name(), "third_party_mirror");
  bool found = false;
  for (const auto& p : registry.loaded())
    found = found || (p.name == "third_party" && p.path == fs::canonical(plugin_file("third_party")).string());
  EXPECT_TRUE(found);
  // The plugin path comes first in the search order.
  EXPECT_EQ(registry.search_folders().front(), std::string(ACC_TEST_PLUGIN_DIR) + "/third_party");
}

TEST(Registry, LoadByNameSearchesPluginPath) {
  PluginPath path(std::string(ACC_TEST_PLUGIN_DIR) + "/nowhere:" + ACC_TEST_PLUGIN_DIR +
                  "/third_party");
  Registry registry;
  EXPECT_EQ(registry.load("third_party").name, "third_party");
  EXPECT_EQ(registry.load("third_party").name, "third_party");  // second load: same plugin
  EXPECT_EQ(registry.loaded().size(), 1u);
}

TEST(Registry, MissingPluginListsFoldersSearched) {
  PluginPath path("/tmp/acc-no-such-folder");
  Registry registry;
  EXPECT_ACC_ERROR(registry.load("nonexistent"),
                   {"plugin 'nonexistent' not found", "libacc_plugin_nonexistent.so",
                    "/tmp/acc-no-such-folder", ACC_BUILD_PLUGIN_DIR_FOR_TEST, "ACC_PLUGIN_PATH"});
  EXPECT_ACC_ERROR(registry.load_file("/tmp/acc-no-such-folder/libacc_plugin_x.so"),
                   {"'/tmp/acc-no-such-folder/libacc_plugin_x.so' does not exist"});
}

TEST(Registry, UnknownStrategyListsKnownOnes) {
  PluginPath path(std::string(ACC_TEST_PLUGIN_DIR) + "/third_party");
  Registry registry;
  EXPECT_ACC_ERROR(registry.make_strategy("no_such_strategy"),
                   {"strategy 'no_such_strategy' is not registered", "third_party_mirror"});
}

// A broken plugin file in the search folders does not hide the others: they load, and a
// strategy that is found nowhere names the file that failed.
TEST(Registry, ABrokenPluginDoesNotStopTheOthers) {
  PluginPath path(std::string(ACC_TEST_PLUGIN_DIR) + "/future_api:" + ACC_TEST_PLUGIN_DIR + "/third_party");
  Registry registry;
  EXPECT_EQ(registry.make_strategy("third_party_mirror")->name(), "third_party_mirror");
  ASSERT_EQ(registry.load_failures().size(), 1u);
  EXPECT_NE(registry.load_failures()[0].find("libacc_plugin_future_api.so"), std::string::npos);
  EXPECT_ACC_ERROR(registry.make_strategy("no_such_strategy"),
                   {"strategy 'no_such_strategy' is not registered", "third_party_mirror",
                    "a plugin failed to load", "libacc_plugin_future_api.so", "plugin API version"});
}

TEST(Registry, MissingEntryPointIsNamed) {
  Registry registry;
  EXPECT_ACC_ERROR(registry.load_file(plugin_file("no_entry")),
                   {"libacc_plugin_no_entry.so", "has no entry point 'acc_plugin_entry'"});
}

TEST(Registry, ApiVersionMismatchNamesBothVersions) {
  Registry registry;
  EXPECT_ACC_ERROR(registry.load_file(plugin_file("future_api")),
                   {"libacc_plugin_future_api.so",
                    "plugin API version " + std::to_string(ACC_PLUGIN_API_VERSION + 1),
                    "plugin API version " + std::to_string(ACC_PLUGIN_API_VERSION)});
  EXPECT_TRUE(registry.loaded().empty());
}

TEST(Registry, DuplicateStrategyNameNamesBothPlugins) {
  Registry registry;
  registry.load_file(plugin_file("third_party"));
  EXPECT_ACC_ERROR(registry.load_file(plugin_file("duplicate")),
                   {"plugin 'duplicate'", "strategy 'third_party_mirror'",
                    "already registered by plugin 'third_party'"});
}

TEST(Registry, DuplicatePluginNameFromTwoFiles) {
  const fs::path copy_dir = fs::temp_directory_path() / ("acc_dup_plugin_" + std::to_string(getpid()));
  fs::create_directories(copy_dir);
  const fs::path copy = copy_dir / Registry::file_name("third_party");
  fs::copy_file(plugin_file("third_party"), copy, fs::copy_options::overwrite_existing);
  Registry registry;
  registry.load_file(plugin_file("third_party"));
  EXPECT_ACC_ERROR(registry.load_file(copy.string()),
                   {copy.string(), "is plugin 'third_party'", "already loaded from"});
  fs::remove_all(copy_dir);
}

TEST(Registry, DuplicateRegistrationInProgram) {
  Registry registry;
  registry.add_comm_backend("loop", [](const acc::dist::Topology&) { return nullptr; });
  EXPECT_ACC_ERROR(
      registry.add_comm_backend("loop", [](const acc::dist::Topology&) { return nullptr; }),
      {"comm backend 'loop'", "already registered by the program itself"});
}

// AUTO asks every registered strategy: a plugin's row that claims an earlier place than the
// built-in ones is chosen, and choosing it names its strategy, with no change to core.
TEST(Registry, APluginsEstimateTakesPartInAuto) {
  PluginPath path(std::string(ACC_TEST_PLUGIN_DIR) + "/third_party");
  const auto shape = acc::estimate::ModelShape::from_name("gpt2-tiny");
  const acc::estimate::Workload one_rank{.world = 1, .ranks_per_node = 1, .batch = 8, .seq = 64};
  const auto rows = acc::strategy_estimates(shape, one_rank, acc::Config{});
  ASSERT_GE(rows.size(), 2u);
  EXPECT_EQ(rows[0].plan, "third_party_mirror");
  EXPECT_EQ(rows[1].plan, "NO_SHARD");
  const acc::AutoChoice choice = acc::choose_auto(rows, int64_t{1} << 40);
  ASSERT_TRUE(choice.fits);
  const acc::Config chosen = acc::apply_auto_choice(
      acc::Config::from_yaml("distributed_type: FSDP\nfsdp_config:\n  fsdp_sharding_strategy: AUTO\n"), choice.row);
  EXPECT_EQ(chosen.strategy_name(), "third_party_mirror");
  // Below the mirror's need, a later row.
  EXPECT_NE(acc::choose_auto(rows, rows[0].memory.total() - 1).row.plan, "third_party_mirror");
  // At two ranks the mirror would not train as one process: it offers no row.
  EXPECT_EQ(acc::strategy_estimates(shape, {.world = 2, .ranks_per_node = 2, .batch = 8, .seq = 64}, acc::Config{})[0].plan,
            "NO_SHARD");
}
