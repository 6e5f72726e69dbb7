#pragma once
// The contract between libacc and a plugin shared object. A plugin exports one C function,
//   extern "C" const AccPluginInfo* acc_plugin_entry();
// (write ACC_PLUGIN(name, register_function) in one .cpp). libacc checks api_version before
// calling anything else, then calls register_plugin, which adds named factories (strategies,
// comm backends) to the registry. Bump ACC_PLUGIN_API_VERSION whenever this contract or a type
// crossing it (Registry, Strategy, ShardedModel, ProcessGroup, Config, optim::ParamGroup) changes
// incompatibly.
namespace acc::plugin {
class Registry;
}

#define ACC_PLUGIN_API_VERSION 6
#define ACC_PLUGIN_ENTRY_SYMBOL "acc_plugin_entry"

extern "C" {
struct AccPluginInfo {
  int api_version;
  const char* name;  // the plugin's name: file libacc_plugin_<name>.so
  void (*register_plugin)(acc::plugin::Registry& registry);
};
}

#define ACC_PLUGIN(plugin_name, register_function)                                  \
  extern "C" __attribute__((visibility("default"))) const AccPluginInfo*           \
  acc_plugin_entry() {                                                              \
    static const AccPluginInfo info{ACC_PLUGIN_API_VERSION, plugin_name, register_function}; \
    return &info;                                                                   \
  }
