#pragma once
// nn::Module: named parameters and children, a type name for wrap policies, train/eval mode,
// and a call boundary that sharding strategies hook without the model knowing:
//   operator()(x) = wrapper_1(x, wrapper_2(..., [pre-forward hooks; forward(x); post-forward hooks]))
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "acc/autograd/hooks.h"
#include "acc/tensor/tensor.h"

namespace acc::nn {

using autograd::HookHandle;

class Module {
 public:
  explicit Module(std::string type_name) : type_name_(std::move(type_name)) {}
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // "Linear", "GPT2Block", ...: what wrap policies match on.
  const std::string& type_name() const { return type_name_; }

  // --- the call boundary ---
  Tensor operator()(const Tensor& x);
  virtual Tensor forward(const Tensor& x);  // default: throws (containers without a forward)

  using PreForwardHook = std::function<void(Module&, const Tensor& input)>;
  // May return a replacement output, or an undefined tensor to keep the output.
  using PostForwardHook = std::function<Tensor(Module&, const Tensor& input, const Tensor& output)>;
  using Inner = std::function<Tensor(const Tensor&)>;
  using CallWrapper = std::function<Tensor(Module&, const Tensor& input, const Inner& inner)>;
  HookHandle register_forward_pre_hook(PreForwardHook hook);
  HookHandle register_forward_hook(PostForwardHook hook);
  // Runs around the whole call (hooks included). Wrappers compose: the first added is the
  // outermost, so several strategies (sharding, tensor parallel, checkpointing) can each hook
  // the same module; the handle removes this one.
  HookHandle add_call_wrapper(CallWrapper wrapper);
  bool has_call_wrapper() const { return !wrappers_.empty(); }

  // --- parameters and children ---
  // Marks t as a leaf that requires grad and keeps it under `name` (no dots).
  Tensor& register_parameter(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> child) {
    add_child(name, child);
    return child;
  }
  // This module's own parameter by local name (throws naming the module's parameters).
  const Tensor& param(std::string_view name) const;
  bool has_param(std::string_view name) const;

  // Fully qualified dotted names in registration order, own parameters before children's. A
  // tensor registered in several places (tied weights) is listed once, under its first name.
  // Virtual: a sharded model lists this rank's shards under the original names instead.
  virtual std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  // Every module with its qualified name; this module first, as "".
  std::vector<std::pair<std::string, Module*>> named_modules();
  // The module called `qualified_name` ("" for this one); an error naming it when there is none.
  Module& submodule(const std::string& qualified_name);
  const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& children() const { return children_; }
  // Replaces a parameter by qualified name ("h.3.attn.c_attn.weight") with a tensor of the same
  // shape (e.g. a view into a flat buffer); requires_grad carries over to a new leaf. Every slot
  // holding the same tensor (tied weights) is replaced, so ties survive.
  void set_parameter(const std::string& qualified_name, Tensor t);
  // As set_parameter, but `t` may have another shape: for a strategy that keeps only a slice of
  // the parameter on this rank (tensor parallelism). The module's forward must take its sizes
  // from its parameters, as nn::Linear does.
  void replace_parameter(const std::string& qualified_name, Tensor t);
  Tensor parameter(const std::string& qualified_name) const;

  // --- modes and utilities ---
  void train(bool on = true);  // recursive
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // set_to_none drops the gradients; otherwise they are zeroed in place (keeping their storage,
  // e.g. views into a strategy's flat gradient buffer).
  void zero_grad(bool set_to_none = true);
  void apply(const std::function<void(Module&)>& fn);  // this module and every descendant

  // Fills this module's own parameters by its init rule, with values keyed by
  // (seed, prefix + local name, element index). Called by nn::init_parameters.
  virtual void reset_parameters(uint64_t seed, const std::string& prefix);

 private:
  void add_child(const std::string& name, std::shared_ptr<Module> child);
  Module* find_owner(const std::string& qualified_name, std::string* local_name) const;
  void collect_parameters(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out,
                          std::vector<const TensorImpl*>& seen) const;

  std::string type_name_;
  bool training_ = true;
  std::vector<std::pair<std::string, Tensor>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  autograd::HookList<PreForwardHook> pre_hooks_;
  autograd::HookList<PostForwardHook> post_hooks_;
  autograd::HookList<CallWrapper> wrappers_;
};

}  // namespace acc::nn
