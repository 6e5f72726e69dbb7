#pragma once
// acc::ShardedModel: what acc::accelerate() returns. It is a models::Model, so the training
// loop is the single-process loop unchanged: forward(batch), train()/eval(), and its
// parameters() are exactly what this rank's optimizer must update — this rank's pieces of the
// parameters, under their original (Hugging Face) names. Strategies subclass it.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "acc/distributed/process_group.h"
#include "acc/models/model.h"
#include "acc/optim/optimizer.h"
#include "acc/strategy/placement.h"

namespace acc {

class ShardedModel : public models::Model {
 public:
  // The wrapped model becomes the child "module" (so train()/eval() reach it).
  ShardedModel(std::string type_name, std::shared_ptr<models::Model> module);

  models::Model& module() const { return *module_; }
  const std::shared_ptr<models::Model>& module_ptr() const { return module_; }

  // This rank's pieces, named as in the wrapped model (frozen ones too, with requires_grad
  // false): what the optimizer updates is those that require grad.
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override = 0;
  // The pieces in optimizer groups: parameters of two or more dimensions (matrices, embedding
  // tables) get `weight_decay`, biases and norm weights none — decided per original parameter,
  // so it holds although the pieces live in one flat buffer. Mixed precision adds the
  // compute-dtype copies the optimizer writes in the same pass.
  virtual std::vector<optim::ParamGroup> param_groups(double weight_decay) const = 0;
  // Scales every rank's gradients so the norm over the whole model is at most max_norm;
  // returns the norm before clipping. A collective over gradient_norm_group(). The default,
  // for every strategy: each piece of parameter_pieces() counted 1 / copies, summed over the
  // group (optim::clip_grad_norm): the placements say all a strategy needs to say.
  virtual double clip_grad_norm(double max_norm);
  // The ranks whose pieces together hold the whole model (copies counted once): what the
  // gradient norm sums over. Null, the default: this rank's pieces are the whole model.
  virtual std::shared_ptr<dist::ProcessGroup> gradient_norm_group() const { return nullptr; }
  // The part of a parameter a rank's tensor holds when a strategy splits it along one
  // dimension (tensor parallelism): the concatenation, along `dim`, of the whole parameter's
  // index ranges `blocks` ([begin, end) each, in order). Several blocks: packed tensors (GPT-2's
  // c_attn holds q, k and v) each split.
  struct DimSlice {
    int dim = 0;
    std::vector<std::pair<int64_t, int64_t>> blocks;
  };
  using Placement = acc::Placement;  // placement.h
  // This rank's part of one original parameter: elements [begin, begin + master.numel()) of
  // the flattened parameter `name` (whole shape `shape`), or, with a `slice`, of that slice
  // flattened. What checkpoints save per rank and fill on load, and the gradient norm sums.
  struct ParameterPiece {
    std::string name;
    Shape shape;
    int64_t begin = 0;
    Tensor master;   // f32, contiguous: what the optimizer updates
    Tensor compute = {};  // the compute-dtype copy the optimizer writes with it, or undefined
    std::optional<DimSlice> slice = std::nullopt;
    // Along each axis of gradient_norm_group()'s ranks; none: the piece is the whole
    // parameter, on this rank alone.
    std::vector<Placement> placements = {};
    // Ranks of gradient_norm_group() holding this same piece: the product of the replicated
    // axes' ranks. The gradient norm counts it once among them.
    int copies() const { return acc::copies(placements); }
  };
  // Where elements [begin, begin + count) of a piece's flattening lie in the flattened whole
  // parameter of shape `whole`: the same range without a slice; with one, the contiguous runs
  // it crosses, in order (one per block for a split first dimension, one per row and block for
  // a split second one). What checkpoints and full_parameters() place pieces by.
  struct Run {
    int64_t whole_begin = 0, count = 0;
    int64_t offset = 0;  // of the run's first element from `begin`
  };
  static std::vector<Run> whole_runs(const Shape& whole, const std::optional<DimSlice>& slice, int64_t begin,
                                     int64_t count);
  // Every piece this rank holds, frozen parameters included. The default suits strategies
  // whose named_parameters() are whole parameters.
  virtual std::vector<ParameterPiece> parameter_pieces() const;
  // Every original parameter's name and whole shape (a strategy that replaces parameters by
  // slices reports the shapes before slicing). The default: the wrapped model's.
  virtual std::vector<std::pair<std::string, Shape>> whole_parameter_shapes() const;
  // The whole model as f32 tensors under the original names and shapes, on every rank
  // (a collective; for checks and full checkpoints of models that fit one rank). The default
  // assembles every rank's parameter_pieces() over gradient_norm_group(), placing each by its
  // slice and range (whole_runs): any strategy that reports its pieces gets it; FSDP and SPMD
  // override it with their own gathers, which hold less at once.
  virtual std::vector<std::pair<std::string, Tensor>> full_parameters();
  // Hands `visit` the whole model a part at a time — f32 tensors under the original names and
  // shapes, every parameter exactly once — on every rank, so a full checkpoint can be written
  // without holding the whole model: FSDP gathers one unit per call. A collective. The default
  // visits full_parameters() at once.
  using FullParametersVisitor =
      std::function<void(const std::vector<std::pair<std::string, Tensor>>&)>;
  virtual void visit_full_parameters(const FullParametersVisitor& visit);
  // Copies full_parameters() into `target`, a fresh model of the same architecture (for saving
  // or sampling: the wrapped model's own parameters are views of shards). A collective.
  void copy_full_parameters_to(nn::Module& target);

  // Undoes, when it ends, what no_sync() or summon_full_params() did when it began. Movable
  // (so it can be returned and kept in a std::optional), not copyable.
  class Scope {
   public:
    Scope(Scope&& other) noexcept
        : model_(std::exchange(other.model_, nullptr)), leave_(other.leave_), flag_(other.flag_) {}
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    Scope& operator=(Scope&&) = delete;
    ~Scope() {
      if (model_) (model_->*leave_)(flag_);
    }

   private:
    friend class ShardedModel;
    using Leave = void (ShardedModel::*)(bool);
    Scope(ShardedModel* model, Leave leave, bool flag) : model_(model), leave_(leave), flag_(flag) {}
    ShardedModel* model_;
    Leave leave_;
    bool flag_;
  };

  // Scope for gradient accumulation without communication: backward passes inside it keep their
  // gradients on this rank (summed); the first backward after it reduces the sum with its own.
  //   { auto guard = sharded->no_sync(); sharded->forward(b1).loss.backward(); }
  //   sharded->forward(b2).loss.backward();   // one reduction of both micro-batches
  [[nodiscard]] Scope no_sync() {
    set_gradient_sync(false);
    return Scope(this, &ShardedModel::set_gradient_sync, true);
  }

  // Scope in which the wrapped model's parameters are whole on every rank, in the compute
  // dtype, for evaluation, generation or inspection through module():
  //   { auto full = sharded->summon_full_params(); generate(module_as_causal_lm, ...); }
  // With writeback (f32 compute only), what the scope changed in them goes back to the shards
  // when it ends; without, changes are not to be relied on either way (dropped where the unit
  // is sharded, kept where the gathered buffer is the master). Entering is a collective (the
  // gathers); leaving is local.
  [[nodiscard]] Scope summon_full_params(bool writeback = false) {
    begin_full_params(writeback);
    return Scope(this, &ShardedModel::end_full_params, writeback);
  }

  // The strategy owns mixed precision (config.compute.bf16).
  void set_compute_dtype(DType dtype) override;
  double train_flops_per_token(int64_t seq_len) const override {
    return module_->train_flops_per_token(seq_len);
  }

  // True for a weight that gets weight decay: two or more dimensions.
  static bool decays(const Shape& original_shape) { return original_shape.size() >= 2; }

 protected:
  // For a strategy that runs a training step's forwards and backwards itself (a pipeline
  // schedule interleaves its microbatches'), so that the user's loop stays forward(batch),
  // loss.backward(), step(). Its forward(batch) returns own_step(loss, gradients): `loss` the
  // whole batch's, `gradients` each parameter with d loss / d parameter. The loss returned
  // carries them: loss.backward(), or (loss * s).backward() as gradient accumulation does,
  // adds s x each gradient to its parameter's .grad, through the parameter's hooks, as a
  // backward through the model would; without a backward no gradient appears. A parameter with
  // no .grad, hooks or sink yet takes the gradient tensor itself as its .grad (no copy). Each gradient
  // has its parameter's shape; parameters that need no gradient are left out.
  static models::ModelOutput own_step(const Tensor& loss, std::vector<std::pair<Tensor, Tensor>> gradients);
  // The same with the gradients made when the loss's backward runs, from the scale it carries
  // (s above): for a strategy that communicates them there, or keeps them (no_sync). One per
  // parameter, in order; an undefined one leaves its parameter's .grad as it is.
  using StepGradients = std::function<std::vector<Tensor>(double scale)>;
  static models::ModelOutput own_step(const Tensor& loss, std::vector<Tensor> parameters, StepGradients gradients);

  // Off inside no_sync(): a strategy that communicates gradients keeps them local meanwhile.
  // The default suits strategies that never communicate gradients.
  virtual void set_gradient_sync(bool /*on*/) {}
  // summon_full_params(): begin checks what can fail (writeback with bf16 compute); end must not
  // throw. The default works from the placements alone: when some rank holds a parameter only
  // in part (a piece of it, or none), full_parameters() assembles the model and every module
  // parameter this rank does not hold whole is replaced by the whole one, in f32; end puts the
  // rank's own tensors back, with writeback first copying the scope's changes into this rank's
  // pieces (f32 compute only). A strategy whose parameters are whole everywhere pays one small
  // agreement; FSDP and SPMD override both with their own gathers.
  virtual void begin_full_params(bool writeback);
  virtual void end_full_params(bool writeback) noexcept;

 private:
  std::shared_ptr<models::Model> module_;
  // The default summon's: the module parameters it replaced, with the tensors they were.
  std::vector<std::pair<std::string, Tensor>> replaced_;
};

}  // namespace acc
