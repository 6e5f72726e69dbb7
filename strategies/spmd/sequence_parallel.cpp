#include "sequence_parallel.h"

#include <algorithm>
#include <map>

#include "acc/autograd/grad_mode.h"
#include "acc/util/error.h"
#include "model_axis_ops.h"

namespace acc::spmd {

namespace {

// An output rule splitting dim 1 of a [batch, sequence, ...] output over `model`.
bool splits_sequence(const ShardingRule& rule) {
  return rule.spec.dims.size() >= 3 && rule.spec.dims[1] == std::vector<std::string>{"model"};
}

// "model.layers.12" -> ("model.layers", 12); -1 when the last part is not an index.
std::pair<std::string, long> parent_and_index(const std::string& path) {
  const auto dot = path.rfind('.');
  const std::string last = dot == std::string::npos ? path : path.substr(dot + 1);
  const bool index = !last.empty() && std::all_of(last.begin(), last.end(), [](char c) { return c >= '0' && c <= '9'; });
  return {dot == std::string::npos ? "" : path.substr(0, dot), index ? std::stol(last) : -1};
}

}  // namespace

std::unique_ptr<SequenceParallel> SequenceParallel::plan(
    models::Model& model, const ResolvedSharding& sharding,
    const std::function<bool(const nn::Module*)>& parallel_linear, std::shared_ptr<dist::ProcessGroup> group) {
  std::map<std::string, nn::Module*> modules;
  for (auto& [path, m] : model.named_modules()) modules[path] = m;
  std::vector<std::pair<long, std::string>> layers;  // (index, path)
  const ShardingRule* first_rule = nullptr;
  std::string parent;
  for (const auto& [path, rule] : sharding.outputs) {
    if (!splits_sequence(rule)) continue;
    const auto [owner, index] = parent_and_index(path);
    ACC_CHECK(index >= 0 && (!first_rule || owner == parent), "SPMD: ", rule.key, ": ", rule.spec.to_string(),
              " splits the sequence of '", path, "''s output over `model`; sequence parallelism splits the ",
              "outputs of a run of consecutive layers of one stack (e.g. model.layers.*), each named ",
              "<stack>.<index>", first_rule ? ", and '" + path + "' is not in the stack '" + parent + "'" : "");
    if (!first_rule) first_rule = &rule;
    parent = owner;
    layers.emplace_back(index, path);
  }
  if (layers.empty()) return nullptr;
  std::sort(layers.begin(), layers.end());
  for (size_t i = 1; i < layers.size(); ++i)
    ACC_CHECK(layers[i].first == layers[i - 1].first + 1, "SPMD: ", first_rule->key, ": the layers whose ",
              "output splits the sequence over `model` must be consecutive: '", layers[i - 1].second,
              "' is followed by '", layers[i].second, "'");

  std::vector<nn::Module*> ordered;
  std::vector<std::pair<nn::Module*, std::vector<std::string>>> replicated;
  std::set<const nn::Module*> inside;
  for (const auto& [_, path] : layers) {
    ordered.push_back(modules.at(path));
    for (auto& [sub, m] : ordered.back()->named_modules()) {
      const std::string where = sub.empty() ? path : path + "." + sub;
      inside.insert(m);
      const bool linear = m->type_name() == "Linear";
      ACC_CHECK(!linear || parallel_linear(m), "SPMD: ", first_rule->key, " splits the sequence over `model`, but ",
                "Linear '", where, "' in '", path, "' is not split over `model`: with the sequence split, every ",
                "Linear in the layer must be column- or row-parallel, so that attention sees every token");
      ACC_CHECK(m->type_name() != "Embedding", "SPMD: ", first_rule->key, " splits the sequence over `model`, ",
                "but '", path, "' holds Embedding '", where, "', which sequence parallelism does not run");
      if (linear) continue;  // a row-parallel bias is reduced by the Linear's own wrapper
      std::vector<std::string> own;
      for (const auto& [name, _p] : m->named_parameters())
        if (name.find('.') == std::string::npos) own.push_back(name);
      if (!own.empty()) replicated.emplace_back(m, std::move(own));
    }
  }
  return std::make_unique<SequenceParallel>(std::move(ordered), std::move(replicated), std::move(inside),
                                            std::move(group));
}

SequenceParallel::SequenceParallel(std::vector<nn::Module*> layers,
                                   std::vector<std::pair<nn::Module*, std::vector<std::string>>> replicated,
                                   std::set<const nn::Module*> inside, std::shared_ptr<dist::ProcessGroup> group)
    : layers_(std::move(layers)), replicated_(std::move(replicated)), inside_(std::move(inside)),
      group_(std::move(group)) {}

void SequenceParallel::install(std::vector<autograd::HookHandle>& hooks, std::function<bool()> bypass) {
  for (nn::Module* layer : layers_)
    hooks.push_back(layer->add_call_wrapper([this, bypass](nn::Module& m, const Tensor& x, const nn::Module::Inner& inner) {
      return bypass() ? inner(x) : call_layer(m, x, inner);
    }));
  for (const auto& [module, names] : replicated_)
    hooks.push_back(module->add_call_wrapper(
        [this, bypass, names = names](nn::Module& m, const Tensor& x, const nn::Module::Inner& inner) {
          return bypass() ? inner(x) : call_reducing_grads(m, names, x, inner);
        }));
}

Tensor SequenceParallel::call_layer(nn::Module& layer, const Tensor& x, const nn::Module::Inner& inner) {
  Tensor in = x;
  if (&layer == layers_.front()) {
    const int n = group_->size();
    ACC_CHECK(x.dim() >= 3 && x.size(1) >= n, "SPMD: sequence parallelism splits dim 1 of the layers' input ",
              "[batch, sequence, ...] over the ", n, " ranks of `model`, which needs at least ", n,
              " tokens; the first split layer got ", x.describe());
    extents_ = split_sizes(x.size(1), n);
    in = scatter_slices(x, 1, extents_, group_);
  } else {
    ACC_CHECK(x.dim() >= 3 && x.size(1) == local_extent(), "SPMD: sequence parallelism: a split layer got ",
              x.describe(), ", not this rank's ", local_extent(), " of the sequence's ", x.size(1), " tokens: ",
              "the split layers must be called one after another, the first one first");
  }
  last_input_ = last_gathered_ = Tensor();
  Tensor y = inner(in);
  last_input_ = last_gathered_ = Tensor();
  return &layer == layers_.back() ? gather_slices(y, 1, extents_, group_) : y;
}

Tensor SequenceParallel::gather_input(const Tensor& x) {
  if (last_input_.defined() && x.is_same(last_input_)) return last_gathered_;
  ACC_CHECK(x.dim() >= 3 && x.size(1) == local_extent(), "SPMD: sequence parallelism: a column-parallel ",
            "Linear in a split layer got ", x.describe(), ", not this rank's ", local_extent(), " tokens");
  last_input_ = x;
  last_gathered_ = gather_partial_slices(x, 1, extents_, group_);
  return last_gathered_;
}

Tensor SequenceParallel::scatter_partial_sums(const Tensor& y) {
  return reduce_scatter_slices(y, 1, extents_, group_);
}

Tensor SequenceParallel::reduced_grad(const Tensor& parameter) const {
  return autograd::GradMode::is_enabled() ? enter_parallel_region(parameter, group_) : parameter;
}

Tensor SequenceParallel::call_reducing_grads(nn::Module& m, const std::vector<std::string>& names, const Tensor& x,
                                             const nn::Module::Inner& inner) const {
  if (!autograd::GradMode::is_enabled()) return inner(x);
  std::vector<Tensor> originals;
  for (const auto& name : names) {
    originals.push_back(m.param(name));
    m.replace_parameter(name, enter_parallel_region(originals.back(), group_));
  }
  struct Restore {  // the module's own parameters back, also when the call throws
    nn::Module& m;
    const std::vector<std::string>& names;
    std::vector<Tensor>& originals;
    ~Restore() {
      for (size_t i = 0; i < originals.size(); ++i) m.replace_parameter(names[i], originals[i]);
    }
  } restore{m, names, originals};
  return inner(x);
}

}  // namespace acc::spmd
