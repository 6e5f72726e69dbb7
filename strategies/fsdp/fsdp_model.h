#pragma once
// The model the FSDP strategy hands back: the user's model with its parameters moved into one
// FlatUnit per wrapped module, and the unit boundaries hooked.
//
//   forward   the root unit is gathered for the whole step (it holds what no other unit does,
//             e.g. position embeddings and the final norm); every other unit gathers at its
//             call and, when resharding after forward (FULL_SHARD, HYBRID_SHARD), releases its
//             gathered buffer right after. The vocabulary units (token embedding and head, see
//             EngineOptions::vocab_parallel) are not gathered for a training step: their ops
//             work on the rows each rank holds; for evaluation they are gathered as the root.
//   backward  a hook on a unit's output gradient re-gathers it before any of its backward runs;
//             each parameter's gradient goes from autograd (a gradient sink) straight into a
//             reduce-scatter into the shards, left running while the backward goes on (about
//             one unit's gradients stay in flight); once every parameter of the unit has had
//             its gradient the unit releases its gathered buffer; at the end of the pass the
//             rest (units with unused parameters, the root) are closed and released, and every
//             reduction is waited for.
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "acc/strategy/sharded_model.h"
#include "acc/autograd/hooks.h"
#include "flat_unit.h"
#include "common/vocab_parallel.h"
#include "wrap_policy.h"

namespace acc::fsdp {

struct EngineOptions {
  std::string strategy;        // for messages and the type name
  UnitGroups groups;
  UnitGroups replicated_groups;  // the ignored modules': this rank alone x every rank
  bool reshard_after_forward;  // FULL_SHARD / HYBRID_SHARD
  DType compute_dtype;         // bf16 with mixed precision
  // Each unit but the root keeps only its input; backward re-runs its forward (re-gathered
  // first under FULL_SHARD) and then its backward.
  bool activation_checkpointing = false;
  // Modules of these classes keep only their input too, whether they are units or inside one.
  std::vector<std::string> checkpoint_classes;
  bool reduce_bf16 = false;  // fsdp_reduce_dtype: bf16
  // fsdp_forward_prefetch: a unit's call issues the all-gather of the unit that came next in
  // the previous step's forward before computing.
  bool forward_prefetch = false;
  // fsdp_backward_prefetch: BACKWARD_PRE issues the all-gather of the unit whose backward comes
  // next when a unit's backward begins, BACKWARD_POST when it ends.
  BackwardPrefetch backward_prefetch = BackwardPrefetch::BACKWARD_PRE;
  // Where sharded units keep their master shard and optimizer state: compute (no offload),
  // offload (fsdp_offload_params) or file (fsdp_offload_dir). Ignored modules stay in compute.
  memory::Tier offload_tier = memory::Tier::compute;
  // fsdp_vocab_parallel: a causal LM's token embedding and head (models::Structure::
  // token_embedding) become units of their own, split by vocabulary rows and never gathered
  // in training; vocab_parallel.h moves the activations instead. Shard groups of one rank, and
  // models that name no token embedding, gather them as before.
  bool vocab_parallel = false;
  // fsdp_bucket_mb: elements of f32 gradient one reduction carries at most (FlatUnit::Options::
  // bucket_numel); 0: a unit's whole gradient.
  int64_t bucket_numel = 0;
  // fsdp_quantize_weights: int8: training gathers send int8 with a scale per this many
  // elements (fsdp_quantize_block); 0: the compute dtype.
  int64_t quantize_block = 0;
  // fsdp_quantize_gradients: int8 or int4: how reductions across nodes cross (FlatUnit::Options).
  dist::ReduceWire gradient_wire;
  bool node_copies = false;  // fsdp_reshard_after_forward: node, where it applies
};

class FsdpModel final : public ShardedModel {
 public:
  FsdpModel(std::shared_ptr<models::Model> module, std::vector<UnitPlan> plans, EngineOptions options);
  ~FsdpModel() override;

  models::ModelOutput forward(const data::Batch& batch) override;
  std::vector<std::pair<std::string, Tensor>> named_parameters() const override;
  std::vector<optim::ParamGroup> param_groups(double weight_decay) const override;
  // Every rank the model is spread over: the ignored modules' replicate group. A piece's copies
  // are its unit's replicate group (hybrid replicas, NO_SHARD's every rank).
  std::shared_ptr<dist::ProcessGroup> gradient_norm_group() const override {
    return options_.replicated_groups.replicate;
  }
  std::vector<std::pair<std::string, Tensor>> full_parameters() override;
  std::vector<ParameterPiece> parameter_pieces() const override;
  void visit_full_parameters(const FullParametersVisitor& visit) override;

  const std::vector<std::unique_ptr<FlatUnit>>& units() const { return units_; }

 private:
  // A ParameterPiece whose master is a leaf view into unit `unit`'s master shard.
  struct Piece : ParameterPiece {
    size_t unit;
    int64_t shard_offset;  // in this rank's shard
    bool decays;
  };

  void set_gradient_sync(bool on) override { gradient_sync_ = on; }
  void begin_full_params(bool writeback) override;
  void end_full_params(bool writeback) noexcept override;
  void hook_unit(size_t u);
  // Moves the token embedding's and the head's weights out of `plans` into units split by rows
  // (before the root), if every one of them is in a sharded unit; returns their names.
  std::vector<std::string> plan_vocab_units(std::vector<UnitPlan>& plans, models::CausalLM& lm);
  void install_vocab_ops(models::CausalLM& lm, const std::vector<std::string>& names);
  parallel::VocabShard vocab_shard(size_t u);
  // True when this forward's vocabulary units stay split: a training forward with labels that
  // does not ask for the logits.
  bool splits_vocab(const data::Batch& batch) const;
  // The unit `offset` places after u in the last forward's order (-1: the one before), if any.
  FlatUnit* neighbour(size_t u, int offset);
  void prefetch(FlatUnit* unit);
  void first_gradient(size_t u);
  void unit_backward_done(size_t u);
  void finish_backward();
  // A backward that threw before its end leaves the phase at backward: its passes are over.
  void close_interrupted_backward();
  // Gradient reductions: each is issued as autograd completes the gradient and runs while the
  // backward goes on. reduce() keeps it in flight, landing the oldest ones once those in flight
  // hold more than reduce_window_ bytes of gradients; land_reductions(0) lands them all.
  void reduce(FlatUnit::Reduction reduction);
  void land_reductions(int64_t keep_bytes);
  bool pieces_have_grads(size_t u) const;
  void point_piece_grads(size_t u);
  FlatUnit& root() { return *units_.back(); }

  EngineOptions options_;
  std::vector<std::unique_ptr<FlatUnit>> units_;  // the root last
  bool listed_for_checkpointing(const nn::Module& m) const;
  void checkpoint_listed_modules();
  std::vector<nn::Module*> call_boundaries_;      // per unit; null: gathered by forward(batch)
  std::vector<Piece> pieces_;
  models::CausalLM* lm_ = nullptr;  // set when its vocabulary units are split
  std::vector<size_t> vocab_units_;
  std::vector<autograd::HookHandle> hooks_;
  // Units (not the root) in the order the last forward called them, and each unit's place in
  // it (-1: not called): what prefetching follows. Ranks run the same code, so every rank
  // issues the same gathers in the same order.
  std::vector<size_t> forward_order_, calls_this_forward_;
  std::vector<int> order_position_;
  std::deque<FlatUnit::Reduction> reducing_;  // issued, not landed, oldest first
  int64_t reducing_bytes_ = 0;  // the gradient bytes they hold
  int64_t reduce_window_ = 0;   // the largest wrapped unit's gradient bytes (0: no overlap)
  // Where the model is (FSDP2's training state); each unit keeps its own (FlatUnit::Params,
  // FlatUnit::Pass).
  //   idle      forward, or between steps
  //   backward  from a unit's first gradient until finish_backward, which is queued to run when
  //             autograd's pass ends
  //   summoned  inside summon_full_params(): every unit stays gathered
  enum class Phase { idle, backward, summoned };
  Phase phase_ = Phase::idle;
  bool gradient_sync_ = true;  // off inside no_sync(): a mode the user sets, kept across phases
};

}  // namespace acc::fsdp
