#pragma once
// The model the SPMD strategy hands back: the user's model with its `model`-axis slices in
// place (tensor_parallel.h) and the FSDP engine holding those slices, sharded over the `fsdp`
// axis, as the inner ShardedModel that runs forward and backward.
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "acc/spmd/mesh.h"
#include "fsdp/fsdp_model.h"
#include "output_sharding.h"
#include "tensor_parallel.h"

namespace acc::spmd {

class SpmdModel final : public ShardedModel {
 public:
  // `whole_over_fsdp`: the parameters every fsdp rank holds whole (their specs do not use fsdp);
  // `output_checks`: the hooks checking the module output rules at each call, removed with it.
  SpmdModel(std::shared_ptr<models::Model> module, std::shared_ptr<fsdp::FsdpModel> engine,
            std::unique_ptr<TensorParallel> tensor_parallel, std::set<std::string> whole_over_fsdp,
            std::shared_ptr<Mesh> mesh, OutputSharding output_sharding,
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
  // Over every rank of the mesh, each value counted once: a slice over `model` or `fsdp` is
  // summed over its axis, a parameter whole along an axis is counted on one of its ranks.
  double clip_grad_norm(double max_norm) override;
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
  std::unique_ptr<TensorParallel> tensor_parallel_;
  std::set<std::string> whole_over_fsdp_;
  std::shared_ptr<Mesh> mesh_;
  OutputSharding output_sharding_;
  std::vector<autograd::HookHandle> output_checks_;
  std::optional<Scope> no_sync_, summoned_;
};

}  // namespace acc::spmd
