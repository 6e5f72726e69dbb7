#pragma once
// Tensor parallelism over the `model` mesh axis, decided per module from the partition specs:
//
//   spec of a Linear's weight [out, in]   the module becomes          its output
//   [model, *]                            column-parallel             split on the last dim
//   [*, model]                            row-parallel                partial sums, all-reduced
//   the causal LM's head weight [model, *]  vocabulary-parallel head  logits split over vocab
//   an Embedding's weight [model, *]      vocabulary-parallel lookup  whole (all-reduced)
//   an Embedding's weight [*, model]      width-parallel lookup       whole (all-gathered)
//
// A column-parallel Linear keeps its rows (and bias) for this rank's output features, a packed
// parameter (GPT-2's c_attn: q, k, v) a slice of each packed tensor, so every rank holds whole
// attention heads. Its input is whole on every rank, so the gradient flowing back into it is
// a partial sum, all-reduced. A row-parallel Linear takes the split input a column-parallel one
// produced and adds its whole bias once, after the sum. The head's loss completes each token's
// softmax over the ranks' vocabulary rows, and an embedding split by rows (GPT-2's is the tied
// head too) looks up the ids its rows hold and sums the pieces over the group; one split by
// width looks up its columns of every id and gathers them. Any other spec that uses `model` is
// an error naming the module. Output rules that split the layers' sequence or hidden dim over
// `model` keep the residual stream split between the tensor-parallel regions (split_layers.h).
#include <memory>
#include <string>
#include <vector>

#include "acc/strategy/sharded_model.h"
#include "acc/autograd/hooks.h"
#include "acc/distributed/process_group.h"
#include "acc/models/model.h"
#include "acc/spmd/sharding_rules.h"
#include "common/split_layers.h"

namespace acc::parallel {

// One parameter split over `model`.
struct ModelAxisSplit {
  std::string name;  // qualified parameter name
  Shape full_shape;
  int dim = 0;       // the dimension split
  int sections = 1;  // tensors packed along dim, each split
};

class TensorParallel {
 public:
  // Checks every parameter spec and module output rule that uses `model`; errors begin with
  // `who` (the strategy) and name the module, its type and the spec. `group` is the mesh's
  // `model` axis.
  TensorParallel(std::string who, models::Model& model, const spmd::ResolvedSharding& sharding,
                 std::shared_ptr<dist::ProcessGroup> group);
  ~TensorParallel();
  TensorParallel(const TensorParallel&) = delete;
  TensorParallel& operator=(const TensorParallel&) = delete;

  bool active() const { return !splits_.empty(); }
  // The causal LM head is split over the vocabulary: its logits are too.
  bool splits_vocabulary() const { return vocab_parallel_head_; }
  const std::vector<ModelAxisSplit>& splits() const { return splits_; }
  const ModelAxisSplit* split_of(const std::string& name) const;
  // True for a column-parallel Linear: its output is split on the last dim over `model`.
  bool splits_output(const nn::Module* module) const;
  // The layers whose outputs the rules split over `model`; null when none are.
  const SplitLayers* split_layers() const { return split_layers_.get(); }

  // Replaces each split parameter of `model` by this rank's slice (before the fsdp engine
  // takes the parameters over).
  void slice_parameters(models::Model& model) const;
  // Hooks the modules' calls and the head's loss (after the engine: its unit wrappers stay
  // outermost, so a unit is gathered before any of its Linears runs).
  void install();
  // For summon_full_params: every split parameter of `model` replaced by the whole one (a
  // collective over the group), the modules computing as the plain model does, until
  // restore_slices() puts this rank's slices back, first copying the whole parameters' values
  // into them with `writeback`.
  void join_parameters(models::Model& model);
  // The writeback copies in place (no tensor is allocated at the scope's end).
  void restore_slices(models::Model& model, bool writeback) noexcept;
  // For a strategy whose own summon puts the whole parameters in place: from step_aside() to
  // step_in() the modules compute as the plain model does (join_parameters and restore_slices
  // call them).
  void step_aside() noexcept;
  void step_in() noexcept;
  // Between step_aside and step_in.
  bool joined() const { return aside_; }
  // The whole parameter from every rank's slice: a collective over the group.
  Tensor gather(const ModelAxisSplit& split, const Tensor& slice) const;
  // The whole vocabulary's logits from this rank's, when splits_vocabulary(): a collective.
  Tensor gather_vocabulary(const Tensor& logits) const;
  // Which indices of the whole parameter this rank's slice holds (take_slice's for this rank).
  ShardedModel::DimSlice slice_held(const ModelAxisSplit& split) const;

 private:
  struct ParallelLinear {
    nn::Module* module;
    bool column;  // else row-parallel
    bool in_split_layer = false;  // inside a layer whose output the rules split
  };
  struct ParallelEmbedding {
    nn::Module* module;
    int64_t extent;  // of the split dim in the whole table: its rows (the vocabulary) or its width
    bool width;      // split on dim 1, else on its rows
  };
  // The model's Structure::split_together: each group split over `model` entirely or not at all, on the
  // dims it names, in whole heads.
  void check_split_together(const models::Model& model) const;
  // The first of this rank's rows when `extent` rows are split over the group.
  int64_t first_row(int64_t extent) const;
  // The head's vocabulary-parallel logits and loss (the model's own while joined).
  void install_head();
  std::string who_;
  std::shared_ptr<dist::ProcessGroup> group_;
  std::vector<ModelAxisSplit> splits_;
  std::vector<ParallelLinear> linears_;
  std::vector<ParallelEmbedding> embeddings_;
  bool vocab_parallel_head_ = false;
  std::unique_ptr<SplitLayers> split_layers_;  // null unless output rules split layers over `model`
  std::vector<autograd::HookHandle> hooks_;
  models::CausalLM* head_owner_ = nullptr;
  // Joined (summon_full_params): the slices of splits_, in order, with the indices each holds,
  // while the whole parameters stand in for them and the wrappers step aside. Empty otherwise.
  struct Stashed {
    Tensor slice;
    ShardedModel::DimSlice held;
  };
  std::vector<Stashed> stashed_;
  bool aside_ = false;
};

// Which indices of the whole parameter rank `rank` of `size` holds under `split`.
ShardedModel::DimSlice held_slice(const ModelAxisSplit& split, int rank, int size);
// That rank's slice of `full` (a copy, counted in the caller's memory category), and its
// inverse over the slices of every rank in rank order.
Tensor take_slice(const Tensor& full, const ModelAxisSplit& split, int rank, int size);
Tensor join_slices(const std::vector<Tensor>& slices, const ModelAxisSplit& split);

}  // namespace acc::parallel
