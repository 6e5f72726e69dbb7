#include "sequence_parallel.h"

#include <algorithm>
#include <map>

#include "acc/autograd/function.h"
#include "acc/autograd/grad_math.h"
#include "acc/autograd/grad_mode.h"
#include "acc/nn/layers.h"
#include "acc/ops/ops.h"
#include "acc/util/error.h"
#include "acc/util/profiler.h"
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
              " splits the sequence of the output of '", path, "' over `model`; sequence parallelism splits the ",
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
      // Masks are keyed by the element's index in the tensor: every rank would draw the same
      // mask for its slice of the sequence.
      const auto* dropout = dynamic_cast<const nn::Dropout*>(m);
      ACC_CHECK(!dropout || dropout->p() == 0.0, "SPMD: ", first_rule->key, " splits the sequence over `model`, ",
                "but '", path, "' holds Dropout '", where, "' (p = ", dropout ? dropout->p() : 0.0, "), which ",
                "would draw the same mask for every rank's slice of the sequence; split layers run without dropout");
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
    ACC_CHECK(x.dim() >= 3, "SPMD: sequence parallelism splits dim 1 of the layers' input [batch, sequence, ...] ",
              "over `model`; the first split layer got ", x.describe());
    extents_ = split_sizes(x.size(1), group_->size());  // fewer tokens than ranks: some hold none
    in = scatter_slices(x, 1, extents_, group_);
  } else {
    ACC_CHECK(x.dim() >= 3 && x.size(1) == local_extent(), "SPMD: sequence parallelism: a split layer got ",
              x.describe(), ", not [batch, ", local_extent(), ", ...] (this rank's tokens of the sequence): ",
              "the split layers must be called one after another, the first one first");
  }
  release_input();
  Tensor y = inner(in);
  release_input();
  return &layer == layers_.back() ? gather_slices(y, 1, extents_, group_) : y;
}

// The input of the column-parallel Linears that read one tensor in a split layer (q, k and v):
// gathered once in forward, kept until the layer returns, and gathered once more in backward,
// where the Linears' partial input gradients are summed and reduce-scattered when the last of
// them has run. In between only this rank's tokens are saved, as in Megatron-LM. The count
// assumes every recorded Linear's output receives a gradient, as each of a layer's does.
struct SequenceParallel::SharedInput {
  Tensor split;     // this rank's tokens
  Tensor gathered;  // every token, while a pass needs them
  Tensor grad;      // the sum of the Linears' partial gradients of `gathered`
  int pending = 0;  // Linears recorded in forward whose backward has not run
};

int64_t SequenceParallel::local_extent() const {
  ACC_CHECK(!extents_.empty(), "SPMD: sequence parallelism: a split layer or a Linear in one ran before the first ",
            "split layer: the sequence is split there");
  return extents_[static_cast<size_t>(group_->rank())];
}

void SequenceParallel::release_input() {
  if (shared_input_) shared_input_->gathered = Tensor();
  shared_input_.reset();
  last_input_ = Tensor();
}

Tensor SequenceParallel::column_linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (!last_input_.defined() || !x.is_same(last_input_)) {
    ACC_CHECK(x.dim() >= 3 && x.size(1) == local_extent(), "SPMD: sequence parallelism: a column-parallel ",
              "Linear in a split layer got ", x.describe(), ", not this rank's ", local_extent(), " tokens");
    release_input();
    last_input_ = x;
    shared_input_ = std::make_shared<SharedInput>();
    shared_input_->split = x.detach();
    ACC_PROFILE("sequence_parallel.gather_input");
    shared_input_->gathered = joined_slices(shared_input_->split, 1, extents_, *group_);
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
  auto backward = [shared, input_grad, group = group_, extents = extents_](autograd::FunctionContext& ctx,
                                                                          const Tensor& grad) {
    const Tensor& w = ctx.saved[0];
    if (!shared->gathered.defined()) {
      ACC_PROFILE("sequence_parallel.gather_input");
      shared->gathered = joined_slices(shared->split, 1, extents, *group);
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
        ACC_PROFILE("sequence_parallel.reduce_scatter_input_grad");
        grads[0] = summed_slice(shared->grad, 1, extents, *group);
        shared->grad = shared->gathered = Tensor();
      }
    }
    return grads;
  };
  return autograd::apply_function("SequenceParallelLinear", inputs, forward, backward);
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
  struct Restore {  // the module's own parameters back, also when a swap or the call throws
    nn::Module& m;
    const std::vector<std::string>& names;
    std::vector<Tensor>& originals;
    ~Restore() {
      for (size_t i = 0; i < originals.size(); ++i) m.replace_parameter(names[i], originals[i]);
    }
  } restore{m, names, originals};
  for (const auto& name : names) {
    const Tensor original = m.param(name);
    const Tensor reduced = enter_parallel_region(original, group_);
    originals.push_back(original);
    m.replace_parameter(name, reduced);
  }
  return inner(x);
}

}  // namespace acc::spmd
