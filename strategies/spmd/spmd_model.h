#pragma once
// The model the SPMD strategy hands back: the user's model with its `model`-axis slices in
// place (tensor_parallel.h) and the FSDP engine holding those slices, sharded over the `fsdp`
// axis, as the inner ShardedModel that runs forward and backward.
#include <memory>
#include <optional>
#include <string>

#include "acc/distributed/mesh.h"
#include "fsdp/fsdp_model.h"
#include "output_sharding.h"
#include "common/tensor_parallel.h"

namespace acc::spmd {

class SpmdModel final : public ShardedModel {
 public:
  // `output_checks`: the hooks checking the module output rules at each call, removed with it.
  SpmdModel(std::shared_ptr<models::Model> module, std::shared_ptr<fsdp::FsdpModel> engine,
            std::unique_ptr<parallel::TensorParallel> tensor_parallel, std::shared_ptr<Mesh> mesh, OutputSharding output_sharding,
            std::vector<autograd::HookHandle> output_checks);
  ~SpmdModel() override;
  SpmdModel(const SpmdModel&) = delete;
  SpmdModel& operator=(const SpmdModel&) = delete;

  // The engine's forward; returned logits as the output sharding asks (output_sharding.h).
  models::ModelOutput forward(const data::Batch& batch) override;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override {
    return engine_->named_parameters();
  }
  std::vector<optim::ParamGroup> param_groups(double weight_decay) const override {
    return engine_->param_groups(weight_decay);
  }
  // The gradient norm sums over every rank of the mesh; parameter_pieces() counts a piece's
  // copies along both axes (whole over fsdp: the engine's replicated unit; not split over
  // model: every model rank).
  std::shared_ptr<dist::ProcessGroup> gradient_norm_group() const override { return mesh_->group(); }
  // The engine's whole parameters, their `model` slices joined (a collective over the mesh).
  std::vector<std::pair<std::string, Tensor>> full_parameters() override;
  // The engine's pieces; a parameter split over `model` gives pieces of this rank's slice.
  std::vector<ParameterPiece> parameter_pieces() const override;
  // The shapes before the `model` axis split them.
  std::vector<std::pair<std::string, Shape>> whole_parameter_shapes() const override;

 private:
  void set_gradient_sync(bool on) override;
  void begin_full_params(bool writeback) override;
  void end_full_params(bool writeback) noexcept override;

  std::shared_ptr<fsdp::FsdpModel> engine_;
  std::unique_ptr<parallel::TensorParallel> tensor_parallel_;
  std::shared_ptr<Mesh> mesh_;
  OutputSharding output_sharding_;
  std::vector<autograd::HookHandle> output_checks_;
  std::optional<Scope> no_sync_, summoned_;
};

}  // namespace acc::spmd
