// A plugin built for a newer plugin API than this libacc: loading must fail naming both
// versions, before its register function is ever called.
#include <cstdlib>

#include "acc/plugin/plugin_api.h"

namespace {
void must_not_run(acc::plugin::Registry&) { std::abort(); }
}  // namespace

extern "C" __attribute__((visibility("default"))) const AccPluginInfo* acc_plugin_entry() {
  static const AccPluginInfo info{ACC_PLUGIN_API_VERSION + 1, "future_api", must_not_run};
  return &info;
}
