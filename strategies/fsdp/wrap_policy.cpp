#include "wrap_policy.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <typeinfo>

#include "acc/nn/containers.h"

namespace acc::fsdp {

namespace {

bool is_prefix_of(const std::string& module, const std::string& param) {
  return module.empty() || param.starts_with(module + ".");
}

// A plain container (an nn::Module or nn::ModuleList made only to hold others, as GPT-2's
// `transformer` and `transformer.h`) is never called itself: its owner calls the children. As a
// unit its parameters would never be gathered. PyTorch's size-based policy passes over its
// ModuleList too.
bool never_called(const nn::Module& m) {
  return typeid(m) == typeid(nn::Module) || typeid(m) == typeid(nn::ModuleList);
}

// Bottom-up: a module becomes a unit when the parameters under it that no unit below took
// reach min_num_params (PyTorch's size-based policy); what a plain container holds is left to
// its owner.
std::vector<std::string> size_based(nn::Module& root, int64_t min_num_params) {
  auto modules = root.named_modules();
  const auto params = root.named_parameters();
  std::vector<std::string> units;
  std::vector<bool> taken(params.size(), false);
  // named_modules lists parents before children: walking it backwards visits children first.
  for (auto it = modules.rbegin(); it != modules.rend(); ++it) {
    const std::string& name = it->first;
    if (name.empty() || never_called(*it->second)) continue;
    int64_t count = 0;
    for (size_t i = 0; i < params.size(); ++i)
      if (!taken[i] && is_prefix_of(name, params[i].first)) count += params[i].second.numel();
    if (count < min_num_params) continue;
    units.push_back(name);
    for (size_t i = 0; i < params.size(); ++i)
      if (is_prefix_of(name, params[i].first)) taken[i] = true;
  }
  std::reverse(units.begin(), units.end());  // back to registration order
  return units;
}

// Whether `name` is a spelling of fsdp_auto_wrap_policy, as config files accept them.
bool is_wrap_policy_name(const std::string& name) {
  try {
    parse_wrap_policy(name, "fsdp_auto_wrap_policy");
    return true;
  } catch (const Error&) {
    return false;
  }
}

// The named classes, or the model's own blocks when none is named.
std::vector<std::string> classes_to_wrap(const nn::Module& root, const std::vector<std::string>& blocks,
                                         const std::vector<std::string>& named) {
  if (!named.empty()) return named;
  ACC_CHECK(!blocks.empty(), "fsdp_transformer_layer_cls_to_wrap: TRANSFORMER_BASED_WRAP names no class "
            "and ", root.type_name(), " declares no blocks of its own (Structure::block_types); name the "
            "module classes to wrap");
  return blocks;
}

std::vector<std::string> by_class(nn::Module& root, const std::vector<std::string>& blocks,
                                  const std::vector<std::string>& named) {
  const auto classes = classes_to_wrap(root, blocks, named);
  std::vector<std::string> units;
  std::set<std::string> present, matched;
  for (auto& [name, module] : root.named_modules()) {
    present.insert(module->type_name());
    if (std::find(classes.begin(), classes.end(), module->type_name()) == classes.end()) continue;
    matched.insert(module->type_name());
    if (!name.empty()) units.push_back(name);
  }
  for (const auto& cls : classes) {
    if (matched.count(cls)) continue;
    std::ostringstream os;
    for (const auto& t : present) os << (os.tellp() ? ", " : "") << t;
    ACC_FAIL("fsdp_transformer_layer_cls_to_wrap: class '", cls, "' matches no module of ",
             root.type_name(), "; its module types are: ", os.str(),
             is_wrap_policy_name(cls) ? " ('" + cls + "' is a value of fsdp_auto_wrap_policy, not a class)" : "");
  }
  return units;
}

std::vector<std::string> by_callable(nn::Module& root, const WrapCallable& wrap) {
  std::vector<std::string> units;
  for (auto& [name, module] : root.named_modules())
    if (!name.empty() && wrap.fn(*module, name)) units.push_back(name);
  return units;
}

// Every name must be a module of root.
void check_ignored(nn::Module& root, const std::vector<std::string>& ignored) {
  std::set<std::string> names;
  for (auto& [name, _] : root.named_modules()) names.insert(name);
  for (const auto& name : ignored)
    ACC_CHECK(!name.empty() && names.count(name), "fsdp_ignored_modules: '", name,
              "' is no module of ", root.type_name(), " (qualified names such as 'transformer.wpe')");
}

bool under_any(const std::vector<std::string>& modules, const std::string& name) {
  return std::any_of(modules.begin(), modules.end(),
                     [&](const std::string& m) { return name == m || is_prefix_of(m, name); });
}

}  // namespace

void drop_empty_units(std::vector<UnitPlan>& plans) {
  plans.erase(std::remove_if(plans.begin(), plans.end() - 1,
                             [](const UnitPlan& p) { return p.params.empty() && !p.replicated; }),
              plans.end() - 1);
}

std::vector<UnitPlan> plan_units(nn::Module& root, const FsdpConfig& config, const models::Structure& structure) {
  const auto& shared = structure.shared_parameters;
  check_ignored(root, config.ignored_modules);
  std::vector<std::string> names;
  if (config.wrap_fn) {
    names = by_callable(root, config.wrap_fn);
  } else {
    switch (config.effective_wrap_policy()) {
      case WrapPolicy::TRANSFORMER_BASED_WRAP: names = by_class(root, structure.block_types, config.wrap_layer_cls); break;
      case WrapPolicy::SIZE_BASED_WRAP: names = size_based(root, config.min_num_params); break;
      case WrapPolicy::NO_WRAP: break;
    }
  }
  std::erase_if(names, [&](const std::string& n) { return under_any(config.ignored_modules, n); });
  // Each parameter goes to the innermost unit whose module contains it.
  std::vector<UnitPlan> plans;
  std::map<std::string, nn::Module*> modules;
  for (auto& [name, module] : root.named_modules()) modules[name] = module;
  plans.push_back(UnitPlan{"<ignored>", nullptr, {}, true});
  for (const auto& n : names) plans.push_back(UnitPlan{n, modules.at(n), {}});
  plans.push_back(UnitPlan{"", &root, {}});
  for (auto& [pname, p] : root.named_parameters()) {
    if (under_any(config.ignored_modules, pname)) {
      plans.front().params.emplace_back(pname, p);
      continue;
    }
    UnitPlan* owner = &plans.back();
    const bool in_root = std::find(shared.begin(), shared.end(), pname) != shared.end();
    for (auto& plan : plans)
      if (!in_root && !plan.replicated && !plan.name.empty() && is_prefix_of(plan.name, pname) &&
          (owner->name.empty() || plan.name.size() > owner->name.size()))
        owner = &plan;
    owner->params.emplace_back(pname, p);
  }
  std::erase_if(plans, [](const UnitPlan& p) { return p.params.empty() && !p.name.empty(); });
  return plans;
}

}  // namespace acc::fsdp
