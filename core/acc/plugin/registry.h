#pragma once
// The plugin registry: names -> factories for comm backends and strategies, filled by plugin
// shared objects (see plugin_api.h) and by code linked into the program.
//
// Plugin files are named libacc_plugin_<name>.so and searched, in order, in the folders of
// ACC_PLUGIN_PATH (colon-separated), the build tree's plugin folder, and the install prefix's
// lib/acc/plugins. Loaded libraries are never unloaded (and the global registry is never
// destroyed), so objects made by a plugin can never outlive its code.
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "acc/config/option_section.h"
#include "acc/distributed/environment.h"
#include "acc/distributed/process_group.h"
#include "acc/strategy/strategy.h"

namespace Poco {
class SharedLibrary;
}

namespace acc::plugin {

// Makes the world group of a comm backend for this process.
using CommBackendFactory =
    std::function<std::shared_ptr<dist::ProcessGroup>(const dist::Topology& topology)>;
using StrategyFactory = std::function<std::unique_ptr<Strategy>()>;

struct LoadedPlugin {
  std::string name;
  std::string path;
  int api_version = 0;  // the plugin API it was built for (always this libacc's: checked at load)
};

// The global registry is also where acc::Config finds plugin-owned option sections.
class Registry : public OptionSectionSource {
 public:
  Registry();
  ~Registry() override;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  static Registry& global();

  // Registration (from a plugin's register function or from linked-in code). A name that is
  // already taken is an error naming both owners.
  void add_comm_backend(const std::string& name, CommBackendFactory factory);
  void add_strategy(const std::string& name, StrategyFactory factory);
  // A strategy's option section (`diloco_config:`), read and written by acc::Config.
  void add_option_section(OptionSection section);

  // Lookup by name. An unknown name first loads plugins from the search folders (the backend
  // plugin of the same name; for strategies every plugin found), then fails listing the known.
  std::shared_ptr<dist::ProcessGroup> make_comm_backend(const std::string& name,
                                                        const dist::Topology& topology);
  std::unique_ptr<Strategy> make_strategy(const std::string& name);

  // Loads one plugin file (a path) or the plugin called `name` from the search folders.
  // Loading the same file again is a no-op. Errors name the file and the reason.
  const LoadedPlugin& load_file(const std::string& path);
  const LoadedPlugin& load(const std::string& name);
  // Loads every libacc_plugin_*.so in the search folders (first one found per name). A file
  // that fails to load does not stop the others: its error is logged once and kept in
  // load_failures(), and lookups that find nothing name it.
  void load_all();
  std::vector<std::string> load_failures() const;

  std::vector<std::string> search_folders() const;
  std::vector<LoadedPlugin> loaded() const;
  std::vector<std::string> comm_backend_names() const;
  std::vector<std::string> strategy_names() const;

  // OptionSectionSource: a name not registered loads every plugin of the search folders first.
  std::shared_ptr<const OptionSection> find_section(const std::string& name) override;
  std::vector<std::shared_ptr<const OptionSection>> sections() override;

  // The file name a plugin called `name` has: libacc_plugin_<name>.so.
  static std::string file_name(const std::string& name);

 private:
  struct Entry;
  const LoadedPlugin& load_file_locked(const std::string& path);
  std::string owner() const;
  std::string failures_suffix() const;  // "; a plugin failed to load: ..." for each, or empty

  mutable std::recursive_mutex mutex_;  // register functions call back in while loading
  std::map<std::string, CommBackendFactory> comm_backends_;
  std::map<std::string, StrategyFactory> strategies_;
  std::map<std::string, std::shared_ptr<const OptionSection>> option_sections_;
  std::map<std::string, std::string> owners_;  // "strategy fsdp" -> who registered it
  std::vector<std::unique_ptr<Entry>> plugins_;
  std::map<std::string, std::string> failures_;  // plugin file -> why it did not load (load_all)
  const Entry* loading_ = nullptr;  // the plugin whose register function is running
};

}  // namespace acc::plugin
