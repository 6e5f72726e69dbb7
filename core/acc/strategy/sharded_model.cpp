#include "acc/strategy/sharded_model.h"

#include "acc/autograd/function.h"
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

int ShardedModel::ParameterPiece::copies() const {
  int n = 1;
  for (const auto& p : placements) n *= p.kind == Placement::Kind::replicated ? p.ranks : 1;
  return n;
}

models::ModelOutput ShardedModel::own_step(const Tensor& loss, std::vector<std::pair<Tensor, Tensor>> gradients) {
  ACC_CHECK(loss.defined() && loss.numel() == 1, "own_step: the loss must be one value, got ",
            loss.defined() ? loss.describe() : "undefined");
  std::vector<Tensor> parameters, grads;
  for (auto& [parameter, grad] : gradients) {
    ACC_CHECK(parameter.requires_grad() && grad.defined() && grad.shape() == parameter.shape(),
              "own_step: the gradient of ", parameter.describe(), " is ", grad.defined() ? grad.describe() : "undefined",
              "; expected one of its shape for a parameter that requires grad");
    parameters.push_back(parameter);
    grads.push_back(std::move(grad));
  }
  // The step is done; its backward only hands each parameter its gradient, scaled as the loss
  // was. Recorded even without parameters (a stage holding only frozen ones), so the user's
  // loss.backward() still works.
  auto forward = [value = loss.detach()](autograd::FunctionContext&, const std::vector<Tensor>&) {
    return value.clone();
  };
  auto backward = [grads = std::move(grads)](autograd::FunctionContext&, const Tensor& seed) {
    const double s = static_cast<double>(seed.item());
    std::vector<Tensor> scaled;
    for (const auto& g : grads) scaled.push_back(s == 1.0 ? g : ops::scale(g, s));
    return scaled;
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

void ShardedModel::visit_full_parameters(const FullParametersVisitor& visit) {
  visit(full_parameters());
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
