#include "acc/plugin/registry.h"

#include <dlfcn.h>

#include <Poco/SharedLibrary.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "acc/plugin/plugin_api.h"
#include "acc/util/error.h"
#include "acc/util/log.h"
#include "acc/util/strings.h"

namespace acc::plugin {
namespace fs = std::filesystem;

struct Registry::Entry {
  LoadedPlugin info;
  std::unique_ptr<Poco::SharedLibrary> library;
};

namespace {

// "[a, b]", for messages.
std::string listed(const std::vector<std::string>& items) {
  std::string out = "[";  // built by appending: GCC 12 warns falsely on "[" + std::string
  out += util::join(items);
  return out += ']';
}

template <class Map>
std::vector<std::string> keys(const Map& map) {
  std::vector<std::string> out;
  for (const auto& [key, value] : map) out.push_back(key);
  return out;
}

std::string canonical_or_same(const std::string& path) {
  std::error_code ec;
  const fs::path p = fs::weakly_canonical(path, ec);
  return ec ? path : p.string();
}

}  // namespace

Registry::Registry() = default;
// Poco::SharedLibrary's destructor leaves the library loaded, so code of a plugin stays valid
// for objects it made even after a (test-local) registry is gone.
Registry::~Registry() = default;

Registry& Registry::global() {
  static Registry* registry = new Registry();  // leaked on purpose: see registry.h
  return *registry;
}

namespace {
// acc::Config finds plugin sections through the global registry from the moment libacc loads,
// whether or not anything made a strategy yet.
[[maybe_unused]] const bool kSectionSourceInstalled = (set_option_section_source(&Registry::global()), true);
}  // namespace

std::string Registry::file_name(const std::string& name) { return "libacc_plugin_" + name + ".so"; }

std::string Registry::failures_suffix() const {
  std::string out;
  for (const auto& [file, why] : failures_) out += "; a plugin failed to load: " + why;
  return out;
}

std::string Registry::owner() const {
  if (!loading_) return "the program itself";
  return "plugin '" + loading_->info.name + "' (" + loading_->info.path + ")";
}

void Registry::add_comm_backend(const std::string& name, CommBackendFactory factory) {
  std::lock_guard lock(mutex_);
  const std::string key = "comm backend '" + name + "'";
  ACC_CHECK(!comm_backends_.count(name), "plugin registry: ", owner(), " registers ", key,
            ", which is already registered by ", owners_[key], "; names must be unique");
  comm_backends_[name] = std::move(factory);
  owners_[key] = owner();
}

void Registry::add_strategy(const std::string& name, StrategyFactory factory) {
  std::lock_guard lock(mutex_);
  const std::string key = "strategy '" + name + "'";
  ACC_CHECK(!strategies_.count(name), "plugin registry: ", owner(), " registers ", key,
            ", which is already registered by ", owners_[key], "; names must be unique");
  strategies_[name] = std::move(factory);
  owners_[key] = owner();
}

void Registry::add_option_section(OptionSection section) {
  std::lock_guard lock(mutex_);
  const std::string key = "option section '" + section.name + "'";
  ACC_CHECK(!section.name.empty() && !option_sections_.count(section.name), "plugin registry: ", owner(),
            " registers ", key, section.name.empty() ? ", which has no name" : ", which is already registered by ",
            owners_[key], "; names must be unique");
  for (size_t i = 0; i < section.options.size(); ++i) {
    const OptionSpec& spec = section.options[i];
    ACC_CHECK(!spec.key.empty() && section.find(spec.key) == &section.options[i], "plugin registry: ", owner(),
              " registers ", key, " with an empty or repeated key '", spec.key, "'");
    spec.checked(spec.default_value, section.name + "." + spec.key + " (its default, from " + owner() + ")");
  }
  auto shared = std::make_shared<const OptionSection>(std::move(section));
  option_sections_[shared->name] = std::move(shared);
  owners_[key] = owner();
}

std::shared_ptr<const OptionSection> Registry::find_section(const std::string& name) {
  std::lock_guard lock(mutex_);
  if (!option_sections_.count(name)) load_all();
  const auto it = option_sections_.find(name);
  return it == option_sections_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<const OptionSection>> Registry::sections() {
  std::lock_guard lock(mutex_);
  load_all();
  std::vector<std::shared_ptr<const OptionSection>> out;
  for (const auto& [name, section] : option_sections_) out.push_back(section);
  return out;
}

std::vector<std::string> Registry::search_folders() const {
  std::vector<std::string> folders;
  if (const char* env = std::getenv("ACC_PLUGIN_PATH"); env && *env) {
    std::stringstream ss(env);
    for (std::string item; std::getline(ss, item, ':');)
      if (!item.empty()) folders.push_back(item);
  }
  // Next to the libacc actually loaded (<libdir>/acc/plugins), before the build tree's: the
  // plugins built with this very libacc, even when the install prefix differs from the one
  // configured (cmake --install --prefix) and a newer build tree exists.
  Dl_info info{};
  if (::dladdr(reinterpret_cast<const void*>(&Registry::global), &info) && info.dli_fname) {
    const auto beside = fs::path(info.dli_fname).parent_path() / "acc" / "plugins";
    folders.push_back(beside.string());
  }
  folders.push_back(ACC_BUILD_PLUGIN_DIR);
  folders.push_back(ACC_INSTALL_PLUGIN_DIR);
  std::vector<std::string> unique;  // first occurrence of each, in order
  for (auto& f : folders)
    if (std::find(unique.begin(), unique.end(), f) == unique.end()) unique.push_back(std::move(f));
  return unique;
}

const LoadedPlugin& Registry::load_file(const std::string& path) {
  std::lock_guard lock(mutex_);
  return load_file_locked(path);
}

const LoadedPlugin& Registry::load_file_locked(const std::string& path_in) {
  const std::string path = canonical_or_same(path_in);
  for (const auto& entry : plugins_)
    if (entry->info.path == path) return entry->info;
  ACC_CHECK(fs::exists(path), "plugin file '", path, "' does not exist");

  auto library = std::make_unique<Poco::SharedLibrary>();
  try {
    // Global symbols: MPI's own components, loaded later by libmpi, resolve against them.
    library->load(path, Poco::SharedLibrary::SHLIB_GLOBAL);
  } catch (const Poco::Exception& e) {
    ACC_FAIL("plugin file '", path, "' could not be loaded: ", e.displayText());
  }
  ACC_CHECK(library->hasSymbol(ACC_PLUGIN_ENTRY_SYMBOL), "plugin file '", path,
            "' has no entry point '", ACC_PLUGIN_ENTRY_SYMBOL,
            "' (extern \"C\" const AccPluginInfo* acc_plugin_entry(), see acc/plugin/"
            "plugin_api.h); it is not an acc plugin");
  using EntryFn = const AccPluginInfo* (*)();
  const AccPluginInfo* info =
      reinterpret_cast<EntryFn>(library->getSymbol(ACC_PLUGIN_ENTRY_SYMBOL))();
  ACC_CHECK(info != nullptr, "plugin file '", path, "': ", ACC_PLUGIN_ENTRY_SYMBOL,
            "() returned null");
  ACC_CHECK(info->api_version == ACC_PLUGIN_API_VERSION, "plugin file '", path,
            "' was built for plugin API version ", info->api_version,
            ", but this libacc has plugin API version ", ACC_PLUGIN_API_VERSION,
            "; rebuild the plugin against this acc");
  ACC_CHECK(info->name && *info->name && info->register_plugin, "plugin file '", path,
            "' has an empty name or no register function");
  for (const auto& entry : plugins_)
    ACC_CHECK(entry->info.name != info->name, "plugin file '", path, "' is plugin '",
              info->name, "', which is already loaded from '", entry->info.path,
              "'; plugin names must be unique");

  auto entry = std::make_unique<Entry>(Entry{{info->name, path, info->api_version}, std::move(library)});
  loading_ = entry.get();
  try {
    info->register_plugin(*this);
  } catch (...) {
    loading_ = nullptr;
    throw;
  }
  loading_ = nullptr;
  plugins_.push_back(std::move(entry));
  log::debug("loaded plugin '{}' from {}", info->name, path);
  return plugins_.back()->info;
}

const LoadedPlugin& Registry::load(const std::string& name) {
  std::lock_guard lock(mutex_);
  for (const auto& entry : plugins_)
    if (entry->info.name == name) return entry->info;
  const auto folders = search_folders();
  for (const auto& folder : folders) {
    const fs::path candidate = fs::path(folder) / file_name(name);
    if (fs::exists(candidate)) return load_file_locked(candidate.string());
  }
  ACC_FAIL("plugin '", name, "' not found: no ", file_name(name), " in the folders searched ",
           listed(folders), "; set ACC_PLUGIN_PATH (colon-separated folders) to add more");
}

void Registry::load_all() {
  std::lock_guard lock(mutex_);
  const std::string prefix = "libacc_plugin_", suffix = ".so";
  for (const auto& folder : search_folders()) {
    std::error_code ec;
    for (const auto& item : fs::directory_iterator(folder, ec)) {
      const std::string file = item.path().filename().string();
      if (file.size() <= prefix.size() + suffix.size() || file.rfind(prefix, 0) != 0 ||
          file.substr(file.size() - suffix.size()) != suffix)
        continue;
      const std::string name =
          file.substr(prefix.size(), file.size() - prefix.size() - suffix.size());
      bool have = false;  // an earlier folder wins, as in load()
      for (const auto& entry : plugins_) have = have || entry->info.name == name;
      if (have || failures_.count(item.path().string())) continue;
      try {
        load_file_locked(item.path().string());
      } catch (const Error& e) {
        log::warn("{} (the other plugins are loaded)", e.what());
        failures_[item.path().string()] = e.what();
      }
    }
  }
}

std::shared_ptr<dist::ProcessGroup> Registry::make_comm_backend(const std::string& name,
                                                                const dist::Topology& topology) {
  CommBackendFactory factory;
  {
    std::lock_guard lock(mutex_);
    if (!comm_backends_.count(name)) load(name);
    ACC_CHECK(comm_backends_.count(name), "comm backend '", name,
              "' is not registered (plugin '", name, "' was loaded but did not register it); ",
              "known comm backends: ", listed(keys(comm_backends_)));
    factory = comm_backends_.at(name);
  }
  return factory(topology);
}

std::unique_ptr<Strategy> Registry::make_strategy(const std::string& name) {
  StrategyFactory factory;
  {
    std::lock_guard lock(mutex_);
    if (!strategies_.count(name)) load_all();
    ACC_CHECK(strategies_.count(name), "strategy '", name, "' is not registered; known ",
              "strategies: ", listed(keys(strategies_)), " (plugins are searched in ",
              listed(search_folders()), ")", failures_suffix());
    factory = strategies_.at(name);
  }
  return factory();
}

std::vector<std::string> Registry::load_failures() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  for (const auto& [file, why] : failures_) out.push_back(why);
  return out;
}

std::vector<LoadedPlugin> Registry::loaded() const {
  std::lock_guard lock(mutex_);
  std::vector<LoadedPlugin> out;
  for (const auto& entry : plugins_) out.push_back(entry->info);
  return out;
}

std::vector<std::string> Registry::comm_backend_names() const {
  std::lock_guard lock(mutex_);
  return keys(comm_backends_);
}

std::vector<std::string> Registry::strategy_names() const {
  std::lock_guard lock(mutex_);
  return keys(strategies_);
}

}  // namespace acc::plugin
