#include "common/split_layers.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>

#include "acc/autograd/function.h"
#include "acc/autograd/grad_math.h"
#include "acc/autograd/grad_mode.h"
#include "acc/nn/layers.h"
#include "acc/ops/ops.h"
#include "acc/util/error.h"
#include "acc/util/profiler.h"
#include "common/model_axis_ops.h"
#include "common/split_norm.h"
#include "common/axis_names.h"

namespace acc::parallel {

namespace {

const std::vector<std::string> kModel{kModelAxis};

// "model.layers.12" -> ("model.layers", 12); -1 when the last part is not an index.
std::pair<std::string, long> parent_and_index(const std::string& path) {
  const auto dot = path.rfind('.');
  const std::string last = dot == std::string::npos ? path : path.substr(dot + 1);
  const bool index = !last.empty() && std::all_of(last.begin(), last.end(), [](char c) { return c >= '0' && c <= '9'; });
  return {dot == std::string::npos ? "" : path.substr(0, dot), index ? std::stol(last) : -1};
}

const char* describe(SplitDim split) {
  return split == SplitDim::sequence ? "the sequence (dim 1)" : "the hidden dim (the last)";
}

// The split a module output rule asks of a layer: the sequence wherever it is named (only layers
// of a stack may split it), the hidden dim for a stack's layer that is not itself a Linear (a
// column-parallel Linear's output is split on the last dim by its own rule).
std::optional<SplitDim> layer_split(const nn::Module& m, const std::string& path, const spmd::ShardingRule& rule) {
  const auto& dims = rule.spec.dims;
  if (dims.size() < 3) return std::nullopt;
  if (dims[1] == kModel) return SplitDim::sequence;
  if (dims.back() == kModel && m.type_name() != nn::Linear::kTypeName && parent_and_index(path).second >= 0)
    return SplitDim::hidden;
  return std::nullopt;
}

}  // namespace

std::unique_ptr<SplitLayers> SplitLayers::plan(models::Model& model, const spmd::ResolvedSharding& sharding,
                                               const std::function<bool(const nn::Module*)>& parallel_linear,
                                               std::shared_ptr<dist::ProcessGroup> group) {
  std::map<std::string, nn::Module*> modules;
  for (auto& [path, m] : model.named_modules()) modules[path] = m;
  std::vector<std::pair<long, std::string>> layers;  // (index, path)
  const spmd::ShardingRule* first_rule = nullptr;
  SplitDim split = SplitDim::sequence;
  std::string parent;
  auto not_in_the_stack = [&](const std::string& path, const spmd::ShardingRule& rule, SplitDim this_split) {
    ACC_FAIL("SPMD: ", rule.key, ": ", rule.spec.to_string(), " splits ", describe(this_split), " of the output of '",
             path, "' over `model`; the rules split the outputs of a run of consecutive layers of one stack (e.g. ",
             "model.layers.*), each named <stack>.<index>",
             first_rule ? ", and '" + path + "' is not in the stack '" + parent + "'" : "");
  };
  // Rules on modules inside the layers, splitting their sequence: statements of what runs there,
  // checked at each call (output_rules.h), once the layers are known.
  std::vector<std::pair<std::string, const spmd::ShardingRule*>> inside_rules;
  for (const auto& [path, rule] : sharding.outputs) {
    const auto this_split = layer_split(*modules.at(path), path, rule);
    if (!this_split) continue;
    const auto [owner, index] = parent_and_index(path);
    if (index < 0 && *this_split == SplitDim::sequence) {
      inside_rules.emplace_back(path, &rule);
      continue;
    }
    if (first_rule && owner != parent) not_in_the_stack(path, rule, *this_split);
    ACC_CHECK(!first_rule || *this_split == split, "SPMD: ", first_rule->key, " splits ", describe(split), " and ",
              rule.key, " splits ", describe(*this_split), " of the layers over `model`: the split layers share one ",
              "split dim");
    if (!first_rule) first_rule = &rule;
    split = *this_split;
    parent = owner;
    layers.emplace_back(index, path);
  }
  for (const auto& [path, rule] : inside_rules) {
    const bool inside_a_layer = split == SplitDim::sequence &&
        std::any_of(layers.begin(), layers.end(), [&](const auto& l) { return path.starts_with(l.second + "."); });
    if (!inside_a_layer) not_in_the_stack(path, *rule, SplitDim::sequence);
  }
  if (layers.empty()) return nullptr;
  std::sort(layers.begin(), layers.end());
  for (size_t i = 1; i < layers.size(); ++i)
    ACC_CHECK(layers[i].first == layers[i - 1].first + 1, "SPMD: ", first_rule->key, ": the layers whose ",
              "output splits ", describe(split), " over `model` must be consecutive: '", layers[i - 1].second,
              "' is followed by '", layers[i].second, "'");

  std::vector<nn::Module*> ordered;
  std::vector<std::pair<nn::Module*, std::vector<std::string>>> whole;
  std::set<const nn::Module*> inside;
  const std::string splits = std::string(first_rule->key) + " splits " + describe(split) + " over `model`, but ";
  for (const auto& [_, path] : layers) {
    ordered.push_back(modules.at(path));
    for (auto& [sub, m] : ordered.back()->named_modules()) {
      const std::string where = sub.empty() ? path : path + "." + sub;
      inside.insert(m);
      const bool linear = m->type_name() == nn::Linear::kTypeName;
      ACC_CHECK(!linear || parallel_linear(m), "SPMD: ", splits, "Linear '", where, "' in '", path, "' is not split ",
                "over `model`: with ", describe(split), " split, every Linear in the layer must be column- or ",
                "row-parallel, so that attention sees every token and every feature");
      ACC_CHECK(m->type_name() != nn::Embedding::kTypeName, "SPMD: ", splits, "'", path, "' holds Embedding '", where,
                "', which split layers do not run");
      // Masks are keyed by the element's index in the tensor: every rank would draw the same
      // mask for its slice.
      const auto* dropout = dynamic_cast<const nn::Dropout*>(m);
      ACC_CHECK(!dropout || dropout->p() == 0.0, "SPMD: ", splits, "'", path, "' holds Dropout '", where,
                "' (p = ", dropout ? dropout->p() : 0.0, "), which would draw the same mask for every rank's ",
                "slice; split layers run without dropout");
      if (linear) continue;  // a row-parallel bias is taken by the Linear's own wrapper
      std::vector<std::string> own;
      for (const auto& [name, _p] : m->named_parameters())
        if (name.find('.') == std::string::npos) own.push_back(name);
      if (own.empty()) continue;
      const bool norm = dynamic_cast<const nn::LayerNorm*>(m) || dynamic_cast<const nn::RMSNorm*>(m);
      ACC_CHECK(split == SplitDim::sequence || norm, "SPMD: ", splits, m->type_name(), " '", where, "' in '", path,
                "' holds parameters and computes on whole rows: with the hidden dim split, only Linears split ",
                "over `model`, LayerNorm and RMSNorm may hold parameters in the layers");
      whole.emplace_back(m, std::move(own));
    }
  }
  return std::make_unique<SplitLayers>(split, std::move(ordered), std::move(whole), std::move(inside),
                                       std::move(group));
}

SplitLayers::SplitLayers(SplitDim split, std::vector<nn::Module*> layers,
                         std::vector<std::pair<nn::Module*, std::vector<std::string>>> whole,
                         std::set<const nn::Module*> inside, std::shared_ptr<dist::ProcessGroup> group)
    : split_(split), layers_(std::move(layers)), whole_(std::move(whole)), inside_(std::move(inside)),
      group_(std::move(group)) {}

void SplitLayers::install(std::vector<autograd::HookHandle>& hooks, std::function<bool()> bypass) {
  for (nn::Module* layer : layers_)
    hooks.push_back(layer->add_call_wrapper([this, bypass](nn::Module& m, const Tensor& x, const nn::Module::Inner& inner) {
      return bypass() ? inner(x) : call_layer(m, x, inner);
    }));
  for (const auto& [module, names] : whole_)
    hooks.push_back(module->add_call_wrapper(
        [this, bypass, names = names](nn::Module& m, const Tensor& x, const nn::Module::Inner& inner) {
          return bypass() ? inner(x) : call_with_whole_parameters(m, names, x, inner);
        }));
}

size_t SplitLayers::dim_of(const Tensor& x) const {
  return split_ == SplitDim::sequence ? 1 : static_cast<size_t>(x.dim() - 1);
}

Tensor SplitLayers::call_layer(nn::Module& layer, const Tensor& x, const nn::Module::Inner& inner) {
  ACC_CHECK(x.dim() >= 3, "SPMD: split layers take [batch, sequence, ...] inputs and split ", describe(split_),
            " over `model`; '", layer.type_name(), "' got ", x.describe());
  const size_t dim = dim_of(x);
  Tensor in = x;
  if (&layer == layers_.front()) {
    extents_ = split_sizes(x.size(static_cast<int>(dim)), group_->size());  // fewer than ranks: some hold none
    in = scatter_slices(x, static_cast<int>(dim), extents_, group_);
  } else {
    ACC_CHECK(x.size(static_cast<int>(dim)) == local_extent(), "SPMD: split layers: a split layer got ",
              x.describe(), ", not this rank's ", local_extent(), " of ", describe(split_),
              ": the split layers must be called one after another, the first one first");
  }
  release_input();
  Tensor y = inner(in);
  release_input();
  return &layer == layers_.back() ? gather_slices(y, static_cast<int>(dim), extents_, group_) : y;
}

// The input of the column-parallel Linears that read one tensor in a split layer (q, k and v):
// gathered once in forward, kept until the layer returns, and gathered once more in backward,
// where the Linears' partial input gradients are summed and reduce-scattered when the last of
// them has run. In between only this rank's slice is saved, as in Megatron-LM. The count
// assumes every recorded Linear's output receives a gradient, as each of a layer's does.
struct SplitLayers::SharedInput {
  Tensor split;     // this rank's slice
  Tensor gathered;  // the whole input, while a pass needs it
  Tensor grad;      // the sum of the Linears' partial gradients of `gathered`
  int pending = 0;  // Linears recorded in forward whose backward has not run
};

std::optional<bool> SplitLayers::holds_slice(const Tensor& y) const {
  if (extents_.empty() || y.dim() < 3) return std::nullopt;
  const int64_t whole = whole_extent(), mine = local_extent();
  const int64_t extent = y.size(static_cast<int>(dim_of(y)));
  if (mine == whole || (extent != mine && extent != whole)) return std::nullopt;
  return extent == mine;
}

int64_t SplitLayers::whole_extent() const {
  local_extent();  // the error when no first split layer has set the extents
  return std::accumulate(extents_.begin(), extents_.end(), int64_t{0});
}

int64_t SplitLayers::local_extent() const {
  ACC_CHECK(!extents_.empty(), "SPMD: split layers: a split layer or a Linear in one ran before the first ",
            "split layer, which splits ", describe(split_));
  return extents_[static_cast<size_t>(group_->rank())];
}

void SplitLayers::release_input() {
  if (shared_input_) shared_input_->gathered = Tensor();
  shared_input_.reset();
  last_input_ = Tensor();
}

Tensor SplitLayers::column_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const size_t dim = dim_of(x);
  if (!last_input_.defined() || !x.is_same(last_input_)) {
    ACC_CHECK(x.dim() >= 3 && x.size(static_cast<int>(dim)) == local_extent(), "SPMD: split layers: a ",
              "column-parallel Linear in a split layer got ", x.describe(), ", not this rank's ", local_extent(),
              " of ", describe(split_));
    release_input();
    last_input_ = x;
    shared_input_ = std::make_shared<SharedInput>();
    shared_input_->split = x.detach();
    ACC_PROFILE("split_layers.gather_input");
    shared_input_->gathered = joined_slices(shared_input_->split, dim, extents_, *group_);
  }
  auto shared = shared_input_;
  const bool input_grad = autograd::GradMode::is_enabled() && x.requires_grad();
  if (input_grad) ++shared->pending;
  std::vector<Tensor> inputs{x, weight};
  if (bias.defined()) inputs.push_back(bias);
  auto forward = [shared](autograd::FunctionContext& ctx, const std::vector<Tensor>& in) {
    ctx.saved = {in[1].detach()};
    return ops::linear(shared->gathered, in[1], in.size() > 2 ? in[2] : Tensor());
  };
  auto backward = [shared, input_grad, dim, group = group_, extents = extents_](autograd::FunctionContext& ctx,
                                                                               const Tensor& grad) {
    const Tensor& w = ctx.saved[0];
    if (!shared->gathered.defined()) {
      ACC_PROFILE("split_layers.gather_input");
      shared->gathered = joined_slices(shared->split, dim, extents, *group);
    }
    // The products in the dtype ops::linear computes them in (bf16 when either operand is),
    // with f32 results as its gradients have.
    const DType dtype = w.dtype() == DType::bf16 || shared->split.dtype() == DType::bf16 ? DType::bf16 : DType::f32;
    auto as = [](const Tensor& t, DType d) { return t.dtype() == d ? t : ops::cast(t, d); };
    const int64_t out = w.size(0), in = w.size(1), rows = grad.numel() / out;
    const Tensor g = as(grad, dtype).view({rows, out});
    std::vector<Tensor> grads(ctx.needs_input_grad.size());
    if (ctx.needs_input_grad[1])
      grads[1] = ops::matmul(g, as(shared->gathered, dtype).view({rows, in}), /*trans_a=*/true);
    if (grads.size() > 2 && ctx.needs_input_grad[2])  // the bias: the output gradient summed over the tokens
      grads[2] = ops::matmul(Tensor::full({1, rows}, 1.0), as(grad, DType::f32).view({rows, out})).view({out});
    if (input_grad) {
      const Tensor partial = ops::matmul(g, as(w, dtype)).view(shared->gathered.shape());
      shared->grad = shared->grad.defined() ? autograd::sum_gradients(std::move(shared->grad), partial) : partial;
      if (--shared->pending == 0) {
        ACC_PROFILE("split_layers.reduce_scatter_input_grad");
        grads[0] = summed_slice(shared->grad, dim, extents, *group);
        shared->grad = shared->gathered = Tensor();
      }
    }
    return grads;
  };
  return autograd::apply_function("SplitLayersLinear", inputs, forward, backward);
}

Tensor SplitLayers::scatter_partial_sums(const Tensor& y) {
  return reduce_scatter_slices(y, static_cast<int>(dim_of(y)), extents_, group_);
}

Tensor SplitLayers::row_bias(const Tensor& bias) const { return local_parameter(bias); }

Tensor SplitLayers::local_parameter(const Tensor& p) const {
  if (split_ == SplitDim::hidden) {  // this rank's features; backward gathers the whole gradient
    ACC_CHECK(p.dim() == 1 && p.size(0) == whole_extent(), "SPMD: split layers: a parameter whole over `model` in a ",
              "layer split on the hidden dim is ", p.describe(), ", not [", whole_extent(), "]");
    return scatter_slices(p, 0, extents_, group_);
  }
  // Used on this rank's tokens: the gradient is a partial sum over the tokens.
  return autograd::GradMode::is_enabled() ? enter_parallel_region(p, group_) : p;
}

Tensor SplitLayers::call_with_whole_parameters(nn::Module& m, const std::vector<std::string>& names, const Tensor& x,
                                               const nn::Module::Inner& inner) const {
  if (split_ == SplitDim::hidden) {  // plan() admitted only the norms here
    const int64_t cols = whole_extent();
    ACC_CHECK(x.dim() >= 1 && x.size(-1) == local_extent(), "SPMD: split layers: ", m.type_name(), " got ",
              x.describe(), ", not this rank's ", local_extent(), " features of ", cols);
    if (const auto* layer_norm = dynamic_cast<const nn::LayerNorm*>(&m))
      return split_layer_norm(x, local_parameter(m.param("weight")), local_parameter(m.param("bias")),
                              layer_norm->eps(), cols, group_);
    return split_rms_norm(x, local_parameter(m.param("weight")), dynamic_cast<const nn::RMSNorm&>(m).eps(), cols,
                          group_);
  }
  if (!autograd::GradMode::is_enabled()) return inner(x);  // no gradient to reduce: the parameters as they are
  std::vector<Tensor> originals;
  struct Restore {  // the module's own parameters back, also when a swap or the call throws
    nn::Module& m;
    const std::vector<std::string>& names;
    std::vector<Tensor>& originals;
    ~Restore() {
      for (size_t i = 0; i < originals.size(); ++i) m.replace_parameter(names[i], originals[i]);
    }
  } restore{m, names, originals};
  for (const auto& name : names) {
    originals.push_back(m.param(name));
    m.replace_parameter(name, local_parameter(originals.back()));
  }
  return inner(x);
}

}  // namespace acc::parallel
