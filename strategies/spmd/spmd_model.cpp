#include "spmd_model.h"

#include <cmath>

#include "acc/util/activity.h"
#include "common/axis_names.h"

namespace acc::spmd {

SpmdModel::SpmdModel(std::shared_ptr<models::Model> module, std::shared_ptr<fsdp::FsdpModel> engine,
                     std::unique_ptr<parallel::TensorParallel> tensor_parallel, std::shared_ptr<Mesh> mesh,
                     OutputSharding output_sharding, std::vector<autograd::HookHandle> output_checks)
    : ShardedModel("SPMD(" + mesh->describe() + ")", std::move(module)),
      engine_(std::move(engine)),
      tensor_parallel_(std::move(tensor_parallel)),
      mesh_(std::move(mesh)),
      output_sharding_(std::move(output_sharding)),
      output_checks_(std::move(output_checks)) {}

SpmdModel::~SpmdModel() {
  for (auto& check : output_checks_) check.remove();
}

models::ModelOutput SpmdModel::forward(const data::Batch& batch) {
  activity::Phase phase("forward");
  models::ModelOutput out = engine_->forward(batch);
  if (out.logits.defined()) out.logits = output_sharding_.apply(out.logits, tensor_parallel_->joined());
  return out;
}

std::vector<std::pair<std::string, Tensor>> SpmdModel::full_parameters() {
  auto full = engine_->full_parameters();
  for (auto& [name, value] : full)
    if (const auto* split = tensor_parallel_->split_of(name)) value = tensor_parallel_->gather(*split, value);
  return full;
}

std::vector<ShardedModel::ParameterPiece> SpmdModel::parameter_pieces() const {
  auto pieces = engine_->parameter_pieces();
  const int model_ranks = mesh_->has_axis(parallel::kModelAxis) ? mesh_->size(parallel::kModelAxis) : 1;
  for (auto& piece : pieces) {
    const auto* split = tensor_parallel_->split_of(piece.name);
    if (split) {
      piece.shape = split->full_shape;
      piece.slice = tensor_parallel_->slice_held(*split);
    }
    if (mesh_->has_axis(parallel::kModelAxis))
      piece.placements.push_back({parallel::kModelAxis, split ? Placement::Kind::split : Placement::Kind::replicated, model_ranks});
  }
  return pieces;
}

std::vector<std::pair<std::string, Shape>> SpmdModel::whole_parameter_shapes() const {
  auto shapes = ShardedModel::whole_parameter_shapes();
  for (auto& [name, shape] : shapes)
    if (const auto* split = tensor_parallel_->split_of(name)) shape = split->full_shape;
  return shapes;
}

void SpmdModel::set_gradient_sync(bool on) {
  if (on)
    no_sync_.reset();
  else if (!no_sync_)
    no_sync_.emplace(engine_->no_sync());
}

void SpmdModel::begin_full_params(bool writeback) {
  summoned_.emplace(engine_->summon_full_params(writeback));
  if (tensor_parallel_->active()) tensor_parallel_->join_parameters(module());
}

void SpmdModel::end_full_params(bool writeback) noexcept {
  if (tensor_parallel_->active()) tensor_parallel_->restore_slices(module(), writeback);
  summoned_.reset();
}

}  // namespace acc::spmd
