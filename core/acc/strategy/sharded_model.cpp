#include "acc/strategy/sharded_model.h"

#include <algorithm>
#include <map>

#include "acc/autograd/engine.h"
#include "acc/autograd/function.h"
#include "acc/distributed/agreement.h"
#include "acc/autograd/grad_mode.h"
#include "acc/ops/elementwise.h"
#include "acc/optim/clip_grad.h"
#include "acc/util/activity.h"

namespace acc {

ShardedModel::ShardedModel(std::string type_name, std::shared_ptr<models::Model> module)
    : models::Model(std::move(type_name)), module_(std::move(module)) {
  ACC_CHECK(module_, "ShardedModel: the model to wrap is null");
  register_module("module", module_);
}

void ShardedModel::copy_full_parameters_to(nn::Module& target) {
  const auto full = full_parameters();
  autograd::NoGradGuard no_grad;
  for (const auto& [name, value] : full) target.parameter(name).copy_(value);
}

models::ModelOutput ShardedModel::own_step(const Tensor& loss, std::vector<std::pair<Tensor, Tensor>> gradients) {
  std::vector<Tensor> parameters, grads;
  for (auto& [parameter, grad] : gradients) {
    ACC_CHECK(parameter.requires_grad() && grad.defined() && grad.shape() == parameter.shape(),
              "own_step: the gradient of ", parameter.describe(), " is ", grad.defined() ? grad.describe() : "undefined",
              "; expected one of its shape for a parameter that requires grad");
    parameters.push_back(parameter);
    grads.push_back(std::move(grad));
  }
  return own_step(loss, std::move(parameters), [grads = std::move(grads)](double scale) {
    std::vector<Tensor> scaled;
    for (const Tensor& g : grads) scaled.push_back(scale == 1.0 ? g : ops::scale(g, scale));
    return scaled;
  });
}

models::ModelOutput ShardedModel::own_step(const Tensor& loss, std::vector<Tensor> parameters, StepGradients gradients) {
  ACC_CHECK(loss.defined() && loss.numel() == 1, "own_step: the loss must be one value, got ",
            loss.defined() ? loss.describe() : "undefined");
  // The step is done; its backward only hands each parameter its gradient, scaled as the loss
  // was. Recorded even without parameters (a stage holding only frozen ones), so the user's
  // loss.backward() still works.
  auto forward = [value = loss.detach()](autograd::FunctionContext&, const std::vector<Tensor>&) {
    return value.clone();
  };
  // A parameter without a gradient, hooks or sink takes its gradient as it is (not a copy, so
  // the step's gradients are not held twice); the engine adds the others as usual.
  auto backward = [parameters, gradients = std::move(gradients)](autograd::FunctionContext&, const Tensor& seed) {
    std::vector<Tensor> grads = gradients(static_cast<double>(seed.item()));
    ACC_CHECK(grads.size() == parameters.size(), "own_step: ", grads.size(), " gradients for ", parameters.size(),
              " parameters");
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) continue;  // none this time (kept by the strategy: no_sync)
      ACC_CHECK(grads[i].shape() == parameters[i].shape(), "own_step: the gradient of ", parameters[i].describe(),
                " is ", grads[i].describe(), "; expected one of its shape");
      if (autograd::adopt_grad(parameters[i], grads[i])) grads[i] = Tensor();
    }
    return grads;
  };
  return {Tensor(), autograd::apply_function("OwnStep", parameters, forward, backward, {.always_record = true})};
}

void ShardedModel::set_compute_dtype(DType) {
  ACC_FAIL(type_name(), ": mixed precision belongs to the strategy; set config.compute.bf16 ",
           "(mixed_precision: bf16 in the config file) before acc::accelerate()");
}

double ShardedModel::clip_grad_norm(double max_norm) {
  activity::Phase phase("clip_grad_norm");
  std::vector<Tensor> grads;
  std::vector<int> copies;
  for (const auto& piece : parameter_pieces())
    if (Tensor g = piece.master.grad(); g.defined()) {
      grads.push_back(g);
      copies.push_back(piece.copies());
    }
  std::function<double(double)> sum_over_ranks;
  if (auto group = gradient_norm_group())
    sum_over_ranks = [group](double local) {
      Tensor total = Tensor::from_vector({static_cast<float>(local)}, {1});
      group->all_reduce(total);
      return static_cast<double>(total.item());
    };
  return optim::clip_grad_norm(grads, copies, sum_over_ranks, max_norm);
}

std::vector<std::pair<std::string, Tensor>> ShardedModel::full_parameters() {
  autograd::NoGradGuard no_grad;
  const auto shapes = whole_parameter_shapes();
  std::map<std::string, int64_t> index;
  for (const auto& [name, _] : shapes) index.emplace(name, static_cast<int64_t>(index.size()));
  // This rank's runs, as (parameter, first element in the whole, count) triples, and their values.
  std::vector<int64_t> runs;
  std::vector<float> values;
  for (const auto& piece : parameter_pieces()) {
    const auto it = index.find(piece.name);
    ACC_CHECK(it != index.end(), type_name(), ": a piece of '", piece.name, "', which is no parameter of the model");
    const Tensor master = piece.master.to(DType::f32);
    const float* data = master.data<float>();
    for (const Run& run : whole_runs(piece.shape, piece.slice, piece.begin, master.numel())) {
      runs.insert(runs.end(), {it->second, run.whole_begin, run.count});
      values.insert(values.end(), data + run.offset, data + run.offset + run.count);
    }
  }
  Tensor all_runs = Tensor::from_vector_i64(runs, {static_cast<int64_t>(runs.size())});
  Tensor all_values = Tensor::from_vector(values, {static_cast<int64_t>(values.size())});
  if (const auto group = gradient_norm_group(); group && group->size() > 1) {  // every rank's, in rank order
    all_runs = dist::all_gather_uneven(*group, all_runs).all;
    all_values = dist::all_gather_uneven(*group, all_values).all;
  }
  std::vector<std::pair<std::string, Tensor>> whole;
  for (const auto& [name, shape] : shapes) whole.emplace_back(name, Tensor::zeros(shape));
  const int64_t* run = all_runs.data<int64_t>();
  const float* value = all_values.data<float>();
  for (int64_t i = 0; i < all_runs.numel(); i += 3) {
    const int64_t k = run[i], at = run[i + 1], count = run[i + 2];
    std::copy_n(value, count, whole[static_cast<size_t>(k)].second.data<float>() + at);
    value += count;
  }
  return whole;
}

void ShardedModel::visit_full_parameters(const FullParametersVisitor& visit) {
  visit(full_parameters());
}

void ShardedModel::begin_full_params(bool writeback) {
  ACC_CHECK(replaced_.empty(), type_name(), ": summon_full_params() scopes do not nest");
  // The parameters this rank holds whole, as its module's own tensor: nothing to replace.
  std::map<std::string, Tensor> whole_here;
  for (const auto& piece : parameter_pieces()) {
    ACC_CHECK(!writeback || !piece.compute.defined(), type_name(), ": summon_full_params(writeback) needs f32 "
              "compute; '", piece.name, "' is computed from a ", dtype_name(piece.compute.dtype()), " copy");
    if (!piece.slice && piece.begin == 0 && piece.master.numel() == shape_numel(piece.shape))
      whole_here.emplace(piece.name, piece.master);
  }
  auto held_whole = [&](const std::string& name) {
    const auto it = whole_here.find(name);
    return it != whole_here.end() && module_->parameter(name).is_same(it->second);
  };
  const auto shapes = whole_parameter_shapes();
  bool missing = !std::ranges::all_of(shapes, [&](const auto& p) { return held_whole(p.first); });
  if (const auto group = gradient_norm_group()) missing = dist::any_rank(*group, missing);
  if (!missing) return;
  autograd::NoGradGuard no_grad;
  for (auto& [name, whole] : full_parameters()) {
    if (held_whole(name)) continue;
    replaced_.emplace_back(name, module_->parameter(name));
    module_->replace_parameter(name, whole);
  }
}

void ShardedModel::end_full_params(bool writeback) noexcept {
  if (replaced_.empty()) return;
  autograd::NoGradGuard no_grad;
  if (writeback) {
    std::map<std::string, Tensor> summoned;
    for (const auto& [name, _] : replaced_) summoned.emplace(name, module_->parameter(name));
    for (const auto& piece : parameter_pieces()) {
      const auto it = summoned.find(piece.name);
      if (it == summoned.end() || !piece.master.defined()) continue;
      const float* whole = it->second.data<float>();
      float* master = piece.master.data<float>();
      for (const Run& run : whole_runs(piece.shape, piece.slice, piece.begin, piece.master.numel()))
        std::copy_n(whole + run.whole_begin, run.count, master + run.offset);
    }
  }
  for (auto& [name, original] : replaced_) module_->replace_parameter(name, std::move(original));
  replaced_.clear();
}

std::vector<ShardedModel::Run> ShardedModel::whole_runs(const Shape& whole, const std::optional<DimSlice>& slice,
                                                     int64_t begin, int64_t count) {
  if (!slice) return {{begin, count, 0}};
  const auto dim = static_cast<size_t>(slice->dim);
  ACC_CHECK(dim < whole.size(), "a slice along dim ", dim, " of a ", whole.size(), "-d tensor");
  int64_t inner = 1;  // elements per index of dim
  for (size_t d = dim + 1; d < whole.size(); ++d) inner *= whole[d];
  std::vector<int64_t> starts{0};  // of each block along the slice's dim
  for (const auto& [b, e] : slice->blocks) starts.push_back(starts.back() + (e - b));
  const int64_t local_span = starts.back() * inner, whole_span = whole[dim] * inner;
  std::vector<Run> runs;
  for (int64_t i = begin, end = begin + count; i < end;) {
    const int64_t outer = i / local_span, within = i % local_span;
    const size_t block = static_cast<size_t>(
        std::upper_bound(starts.begin(), starts.end(), within / inner) - starts.begin() - 1);
    const int64_t block_end = outer * local_span + starts[block + 1] * inner;
    const int64_t at = outer * whole_span + slice->blocks[block].first * inner +
                       (within - starts[block] * inner);
    const int64_t n = std::min(end, block_end) - i;
    if (!runs.empty() && runs.back().whole_begin + runs.back().count == at)
      runs.back().count += n;
    else
      runs.push_back({at, n, i - begin});
    i += n;
  }
  return runs;
}

std::vector<ShardedModel::ParameterPiece> ShardedModel::parameter_pieces() const {
  std::vector<ParameterPiece> out;
  for (const auto& [name, p] : named_parameters()) out.push_back({name, p.shape(), 0, p, Tensor()});
  return out;
}

std::vector<std::pair<std::string, Shape>> ShardedModel::whole_parameter_shapes() const {
  std::vector<std::pair<std::string, Shape>> out;
  for (const auto& [name, p] : module_->named_parameters()) out.emplace_back(name, p.shape());
  return out;
}

}  // namespace acc
