#pragma once
// PipelineModel: a causal LM cut into stages over the world's ranks, each rank holding only its
// stage's parameters (the others keep their shape without memory). With fewer stages than ranks
// (pipeline_config.stages) each stage runs on ranks / stages replicas, which see different data
// and shard the stage's parameters among them (stage_shards.h). A training forward
// runs the whole step: the batch cut into microbatches by rows, each stage running their
// forwards and backwards in the schedule's order, activations sent to the next stage and their
// gradients back to the one before; it returns ShardedModel::own_step, so the user's
// loss.backward() and optimizer step are the usual ones. Every rank returns the same loss (with
// replicas, the mean of theirs). Any other forward (evaluation, generation without summon) runs
// the stages once on the whole batch and gives every rank of the pipeline the last stage's
// output (with replicas, each replica its own batch's, as data-parallel ranks do).
//
// With pipeline_config.tensor_parallel T > 1 each stage's layers are split over T neighbouring
// ranks (parallel::TensorParallel, from the split the model's Structure implies): each holds its
// heads, MLP units and vocabulary rows, and runs the same schedule as the others, each sending
// its (whole) activations to its own counterpart in the next stage.
//
// Under bf16 compute the module computes with a bf16 copy of each held parameter, which the
// optimizer writes with the f32 master; gradients are summed over microbatches in f32. With
// activation checkpointing a stage keeps only each in-flight microbatch's input and runs its
// forward again, with gradients, when the microbatch's backward comes.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "acc/strategy/sharded_model.h"
#include "common/tensor_parallel.h"
#include "pipeline_options.h"
#include "stage_link.h"
#include "stage_shards.h"
#include "stages.h"
#include "timeline.h"

namespace acc::pipeline {

class PipelineModel : public ShardedModel {
 public:
  PipelineModel(std::shared_ptr<models::Model> model, std::shared_ptr<dist::ProcessGroup> world,
                PipelineOptions options);

  models::ModelOutput forward(const data::Batch& batch) override;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override;
  std::vector<optim::ParamGroup> param_groups(double weight_decay) const override;
  std::shared_ptr<dist::ProcessGroup> gradient_norm_group() const override { return world_; }
  // The default pieces, a tied parameter's marked as held by each of its stages, a
  // tensor-parallel one's by the slice it holds.
  std::vector<ParameterPiece> parameter_pieces() const override;
  std::vector<std::pair<std::string, Shape>> whole_parameter_shapes() const override;

  int stage() const { return grid_.stage; }  // this rank's place in the pipeline

 private:
  struct Microbatch;
  models::ModelOutput train_step(const data::Batch& batch);
  models::ModelOutput evaluate(const data::Batch& batch);
  // One action of the schedule; the time it computes (not waiting for a neighbour) is marked
  // "pipeline.compute" for ACC_PROFILE (the whole schedule "pipeline.schedule") and recorded in
  // the timeline.
  void run_forward(Microbatch& micro, const Action& action);
  // A backward: the whole one, or under zero_bubble the input's gradient only, the weights'
  // part kept in the microbatch for its run_weight.
  void run_backward(Microbatch& micro, const Action& action, std::vector<Tensor>& grads);
  void run_weight(Microbatch& micro, const Action& action, std::vector<Tensor>& grads);
  // What the module computes with for each trained parameter, in held_'s order.
  std::vector<Tensor> trained_weights() const;
  // grads[i] += the gradient of held_[i] for each trained one, from `got` (trained_weights()'s
  // order, maybe followed by others).
  void add_weight_gradients(const std::vector<Tensor>& got, std::vector<Tensor>& grads) const;
  // The virtual stage of this rank's chunk c (c * stages + stage; one chunk unless interleaved).
  int virtual_stage(int chunk) const;
  // A chunk's part of the model on a microbatch: from its input (or the embedding of its ids)
  // through the stage's layers, and on the last stage to its loss.
  Tensor stage_output(const Microbatch& micro, int chunk);
  // The layers (or their branches) of a virtual stage on x.
  Tensor run_layers(Tensor x, int virtual_stage);
  // The last stage's output sent to every rank.
  models::ModelOutput share_output(const models::ModelOutput& out);
  // Inside no_sync() a step's gradients stay summed on this rank, whole, and travel with the
  // first step after it (as FSDP's no_sync does), when any would travel: with replicas or a
  // tied head.
  void set_gradient_sync(bool on) override { sync_ = on; }
  bool communicates_gradients() const;
  // Run by the user's backward: a step's whole f32 gradients `grads` (one per held parameter,
  // undefined: none) scaled as the loss was; kept under no_sync, else with what was kept added,
  // reduced over the replicas and summed between a tied parameter's stages. Returns each
  // trained master's gradient (none under no_sync).
  std::vector<Tensor> finish_gradients(std::vector<Tensor>& grads, double scale);
  // The default summon, with the tensor-parallel hooks stepped aside while it lasts.
  void begin_full_params(bool writeback) override;
  void end_full_params(bool writeback) noexcept override;

  models::CausalLM& lm_;
  std::shared_ptr<dist::ProcessGroup> world_;
  PipelineOptions options_;
  StageGrid grid_;
  std::shared_ptr<dist::ProcessGroup> pipe_;  // this replica's stages, ranked by stage
  std::shared_ptr<dist::ProcessGroup> fsdp_;  // this stage's replicas; null with one
  std::unique_ptr<parallel::TensorParallel> tensor_parallel_;  // over this stage's T ranks; null with one
  models::Structure::Chain chain_;
  StagePlan plan_;
  StageLink link_;
  // This stage's parameters: the f32 master the optimizer updates (the whole parameter, or this
  // rank's range of it from `begin` when the stage has replicas), what the module computes with
  // when that is not the master (the bf16 copy the optimizer writes, or the whole parameter
  // gathered from the replicas' ranges), and for a parameter several stages hold (a tied
  // head) how many and the group of those ranks in this replica.
  struct Held {
    std::string name;
    Shape shape;
    Tensor master;
    int64_t begin = 0;
    Tensor compute = {};
    int holders = 1;
    std::shared_ptr<dist::ProcessGroup> group = nullptr;
    const Tensor& used() const { return compute.defined() ? compute : master; }
  };
  // Whether `compute` is a bf16 copy the optimizer writes with the master (one replica per
  // stage); with replicas it is gathered before each forward instead.
  bool optimizer_writes_compute() const { return options_.bf16 && !shards_; }
  std::vector<Held> held_;
  std::optional<StageShards> shards_;
  Timeline timeline_;
  double step_loss_ = 0;  // the last stage's weighted sum of its microbatches' losses
  bool sync_ = true;       // off inside no_sync()
  std::vector<Tensor> pending_;  // per held parameter: the gradients no_sync kept, whole, f32
};

}  // namespace acc::pipeline
