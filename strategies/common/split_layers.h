#pragma once
// Layers whose outputs the rules split over the `model` mesh axis, so that between the
// tensor-parallel regions (attention, MLP) each rank keeps only its share of the residual stream:
// its norms and residual adds, and the activations they save, cover 1/model of it. Two ways:
//
//   sequence  `model.layers.*: [fsdp, model, null]`  dim 1: this rank's tokens, every feature
//             (Megatron-LM's sequence parallelism)
//   hidden    `model.layers.*: [fsdp, null, model]`  the last dim: this rank's features of every
//             token (torchprime's and PyTorch/XLA's fsdp-tp configs)
//
// Where the layers' tensor-parallel Linears need the whole input, the split dim is gathered:
//
//   where                           forward                           backward
//   the first split layer's input   this rank's slice (scatter)       all-gather
//   a column-parallel Linear        all-gather of its input, once     all-gather again, then
//                                   for every Linear reading the      reduce-scatter of the summed
//                                   same tensor (q, k and v); only    partial gradients, once for
//                                   the slice is saved                those Linears
//   a row-parallel Linear           reduce-scatter of the partial     all-gather
//                                   sums (in place of all-reduce)
//   the last split layer's output   all-gather, for the final norm    this rank's slice
//                                   and the head
//
// The parameters in the layers that are whole over `model` (norms, a row-parallel bias) differ:
//
//   sequence  used whole on this rank's tokens; their gradient is a partial sum, all-reduced
//   hidden    this rank's slice of them is used (scatter; backward all-gathers the gradient);
//             a norm sums its row statistics over `model` (split_norm.h), so only LayerNorm and
//             RMSNorm may hold parameters there
//
// The split layers must be consecutive siblings (a stack of decoder layers), every Linear in
// them column- or row-parallel (attention mixes tokens and reads every feature, so it must run
// between a gather and a reduce-scatter), and without dropout (its masks are keyed by the index
// in the tensor, so each rank's slice would get the same one). The dim splits as evenly as it
// can (split_sizes), its extents set at the first layer of each forward; with fewer tokens than
// ranks (a token at a time) some ranks hold none.
#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "acc/distributed/process_group.h"
#include "acc/models/model.h"
#include "acc/spmd/sharding_rules.h"

namespace acc::parallel {

enum class SplitDim { sequence, hidden };

class SplitLayers {
 public:
  // From the module output rules of a stack's layers that split dim 1 or the last dim over
  // `model`; null when none does. Errors name the rule and the module: layers that are not
  // consecutive siblings of one stack, both dims split, a Linear in them that `parallel_linear`
  // says is not split over `model`, an Embedding or a Dropout in them, and with the hidden dim
  // split, a module with parameters that is not a Linear, LayerNorm or RMSNorm.
  static std::unique_ptr<SplitLayers> plan(models::Model& model, const spmd::ResolvedSharding& sharding,
                                           const std::function<bool(const nn::Module*)>& parallel_linear,
                                           std::shared_ptr<dist::ProcessGroup> group);

  // True when `rule` is one plan() takes: a stack layer's output split on dim 1 or the last dim.
  static bool splits_layer(const std::string& path, const spmd::ShardingRule& rule);

  // `layers` in call order; `whole` the modules in them with parameters whole over `model`,
  // each with those parameters' local names.
  SplitLayers(SplitDim split, std::vector<nn::Module*> layers,
              std::vector<std::pair<nn::Module*, std::vector<std::string>>> whole,
              std::set<const nn::Module*> inside, std::shared_ptr<dist::ProcessGroup> group);

  SplitDim split() const { return split_; }
  // True for a split layer and every module in one.
  bool contains(const nn::Module* m) const { return inside_.count(m) > 0; }
  bool is_layer(const nn::Module* m) const { return std::find(layers_.begin(), layers_.end(), m) != layers_.end(); }
  // Whether `y`, made in a split layer, holds this rank's share of the current forward's split
  // dim (true) or all of it (false); empty where its extent cannot tell (the same either way).
  std::optional<bool> holds_slice(const Tensor& y) const;

  // Hooks the layers' calls and the modules with whole parameters; while `bypass()` is true
  // (summon_full_params) the hooks step aside.
  void install(std::vector<autograd::HookHandle>& hooks, std::function<bool()> bypass);

  // For the tensor-parallel Linears inside the split layers: a column-parallel one's product
  // (x this rank's slice, the output from the whole input), a row-parallel one's reduce-scatter,
  // and its (whole) bias as this rank's output slice needs it.
  Tensor column_linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
  Tensor scatter_partial_sums(const Tensor& y);
  Tensor row_bias(const Tensor& bias) const;

 private:
  Tensor call_layer(nn::Module& layer, const Tensor& x, const nn::Module::Inner& inner);
  // A module whose parameters are whole over `model`, called on this rank's slice.
  Tensor call_with_whole_parameters(nn::Module& m, const std::vector<std::string>& names, const Tensor& x,
                                    const nn::Module::Inner& inner) const;
  // The split dim of x (1, or its last).
  size_t dim_of(const Tensor& x) const;
  // This rank's share of the current forward's split dim; the error when no first split layer
  // has set it.
  int64_t local_extent() const;
  // The whole extent of that dim (the sum of the ranks' shares).
  int64_t whole_extent() const;
  // A parameter whole over `model` as this rank uses it (see the table above).
  Tensor local_parameter(const Tensor& p) const;

  SplitDim split_;
  std::vector<nn::Module*> layers_;
  std::vector<std::pair<nn::Module*, std::vector<std::string>>> whole_;
  std::set<const nn::Module*> inside_;
  std::shared_ptr<dist::ProcessGroup> group_;
  struct SharedInput;
  // Forgets the last column-parallel input, releasing its gathered copy.
  void release_input();

  std::vector<int64_t> extents_;  // the ranks' shares of the current forward's split dim
  // The last column-parallel input and what its Linears share, until another input comes or
  // the layer returns: q, k and v (gate and up) read one tensor.
  Tensor last_input_;
  std::shared_ptr<SharedInput> shared_input_;
};

}  // namespace acc::parallel
