#include "acc/nn/module.h"

#include <algorithm>
#include <sstream>

namespace acc::nn {

namespace {

void check_local_name(const std::string& name, const std::string& type, const char* what) {
  ACC_CHECK(!name.empty() && name.find('.') == std::string::npos, type, ": ", what, " name '",
            name, "' must be non-empty and contain no '.'");
}

}  // namespace

Tensor Module::operator()(const Tensor& x) {
  Inner inner = [this](const Tensor& input) {
    for (auto& hook : pre_hooks_.snapshot()) hook(*this, input);
    Tensor output = forward(input);
    for (auto& hook : post_hooks_.snapshot())
      if (Tensor replaced = hook(*this, input, output); replaced.defined()) output = replaced;
    return output;
  };
  const auto wrappers = wrappers_.snapshot();
  // Wrap from the innermost (last added) outwards.
  for (auto it = wrappers.rbegin(); it != wrappers.rend(); ++it)
    inner = [this, wrapper = *it, next = std::move(inner)](const Tensor& input) {
      return wrapper(*this, input, next);
    };
  return inner(x);
}

HookHandle Module::add_call_wrapper(CallWrapper wrapper) {
  ACC_CHECK(wrapper, type_name_, ": add_call_wrapper needs a callable");
  return wrappers_.add(std::move(wrapper));
}

Tensor Module::forward(const Tensor&) {
  ACC_FAIL(type_name_, ": this module has no forward (it is a container); call its children");
}

HookHandle Module::register_forward_pre_hook(PreForwardHook hook) {
  return pre_hooks_.add(std::move(hook));
}

HookHandle Module::register_forward_hook(PostForwardHook hook) {
  return post_hooks_.add(std::move(hook));
}

Tensor& Module::register_parameter(const std::string& name, Tensor t) {
  check_local_name(name, type_name_, "parameter");
  ACC_CHECK(t.defined(), type_name_, ": parameter '", name, "' is undefined");
  ACC_CHECK(!has_param(name), type_name_, ": parameter '", name, "' is already registered");
  t.set_requires_grad(true);
  params_.emplace_back(name, std::move(t));
  return params_.back().second;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> child) {
  check_local_name(name, type_name_, "child module");
  ACC_CHECK(child, type_name_, ": child module '", name, "' is null");
  for (const auto& [existing, _] : children_)
    ACC_CHECK(existing != name, type_name_, ": child module '", name, "' is already registered");
  children_.emplace_back(name, std::move(child));
}

bool Module::has_param(std::string_view name) const {
  for (const auto& [n, _] : params_)
    if (n == name) return true;
  return false;
}

const Tensor& Module::param(std::string_view name) const {
  for (const auto& [n, t] : params_)
    if (n == name) return t;
  std::ostringstream known;
  for (const auto& [n, _] : params_) known << ' ' << n;
  ACC_FAIL(type_name_, ": no parameter '", name, "'; it has:", known.str());
}

void Module::collect_parameters(const std::string& prefix,
                                std::vector<std::pair<std::string, Tensor>>& out,
                                std::vector<const TensorImpl*>& seen) const {
  for (const auto& [name, t] : params_) {
    if (std::find(seen.begin(), seen.end(), t.impl().get()) != seen.end()) continue;
    seen.push_back(t.impl().get());
    out.emplace_back(prefix + name, t);
  }
  for (const auto& [name, child] : children_)
    child->collect_parameters(prefix + name + ".", out, seen);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  std::vector<const TensorImpl*> seen;
  collect_parameters("", out, seen);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [_, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (const auto& [name, child] : children_)
    for (auto& [sub, m] : child->named_modules())
      out.emplace_back(sub.empty() ? name : name + "." + sub, m);
  return out;
}

Module* Module::find_owner(const std::string& qualified_name, std::string* local_name) const {
  const Module* m = this;
  size_t start = 0;
  for (size_t dot; (dot = qualified_name.find('.', start)) != std::string::npos; start = dot + 1) {
    const std::string child = qualified_name.substr(start, dot - start);
    const Module* next = nullptr;
    for (const auto& [name, c] : m->children_)
      if (name == child) next = c.get();
    ACC_CHECK(next, type_name_, ": no parameter '", qualified_name, "' (", m->type_name_,
              " has no child '", child, "')");
    m = next;
  }
  *local_name = qualified_name.substr(start);
  return const_cast<Module*>(m);
}

Module& Module::submodule(const std::string& qualified_name) {
  for (auto& [name, m] : named_modules())
    if (name == qualified_name) return *m;
  ACC_FAIL(type_name_, ": no module '", qualified_name, "'");
}

Tensor Module::parameter(const std::string& qualified_name) const {
  std::string local;
  return find_owner(qualified_name, &local)->param(local);
}

void Module::set_parameter(const std::string& qualified_name, Tensor t) {
  std::string local;
  Module* owner = find_owner(qualified_name, &local);
  const Tensor old = owner->param(local);  // throws, naming the owner's parameters
  ACC_CHECK(t.defined() && t.shape() == old.shape(), "set_parameter: '", qualified_name, "' is ",
            old.describe(), " but the replacement is ", t.defined() ? t.describe() : "undefined");
  replace_parameter(qualified_name, std::move(t));
}

void Module::replace_parameter(const std::string& qualified_name, Tensor t) {
  std::string local;
  Module* owner = find_owner(qualified_name, &local);
  const Tensor old = owner->param(local);
  ACC_CHECK(t.defined(), "replace_parameter: the replacement of '", qualified_name, "' is undefined");
  if (old.requires_grad() && !t.requires_grad() && !t.grad_fn()) t.set_requires_grad(true);
  for (auto& [_, m] : named_modules())
    for (auto& [name, slot] : m->params_)
      if (slot.is_same(old)) slot = t;
}

void Module::train(bool on) {
  apply([on](Module& m) { m.training_ = on; });
}

void Module::zero_grad(bool set_to_none) {
  for (auto& [_, t] : named_parameters()) {
    Tensor g = t.grad();
    if (!g.defined()) continue;
    if (set_to_none)
      t.set_grad(Tensor());
    else
      g.zero_();
  }
}

void Module::apply(const std::function<void(Module&)>& fn) {
  for (auto& [_, m] : named_modules()) fn(*m);
}

void Module::reset_parameters(uint64_t, const std::string&) {}

}  // namespace acc::nn
