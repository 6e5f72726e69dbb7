#pragma once
// Sequence parallelism over the `model` mesh axis (Megatron-LM's): layers whose output rule
// splits dim 1, the sequence, over `model` (`model.layers.*: [fsdp, model, null]`) keep the
// residual stream split between tensor-parallel regions, so each rank's norms and residual
// adds, and the activations they save, cover only its slice of the tokens. Where the layers'
// tensor-parallel Linears need every token, the sequence is gathered:
//
//   where                           forward                           backward
//   the first split layer's input   this rank's slice (scatter)       all-gather
//   a column-parallel Linear        all-gather of its input, once     all-gather again, then
//                                   for every Linear reading the      reduce-scatter of the summed
//                                   same tensor (q, k and v); only    partial gradients, once for
//                                   the slice is saved                those Linears
//   a row-parallel Linear           reduce-scatter of the partial     all-gather
//                                   sums (in place of all-reduce)
//   a parameter whole over `model`  unchanged                         all-reduce: computed from
//   in a split layer (norms, the                                      this rank's tokens, its
//   row-parallel bias)                                                gradient is a partial sum
//   the last split layer's output   all-gather, for the final norm    this rank's slice
//                                   and the head
//
// The split layers must be consecutive siblings (a stack of decoder layers), every Linear in
// them column- or row-parallel (attention mixes tokens, so it must run between a gather and a
// reduce-scatter), and without dropout (its masks are keyed by the index in the tensor, so each
// rank's slice would get the same one). The sequence splits as evenly as it can (split_sizes),
// its extents set at the first layer of each forward; with fewer tokens than ranks (a token at
// a time) some ranks hold none.
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "acc/dist/process_group.h"
#include "acc/models/model.h"
#include "acc/spmd/sharding_rules.h"

namespace acc::spmd {

class SequenceParallel {
 public:
  // From the module output rules that split dim 1 over `model`; null when none does. Errors
  // name the rule and the module: layers that are not consecutive siblings, a Linear in them
  // that `parallel_linear` says is not split over `model`, an Embedding or a Dropout in them.
  static std::unique_ptr<SequenceParallel> plan(models::Model& model, const ResolvedSharding& sharding,
                                                const std::function<bool(const nn::Module*)>& parallel_linear,
                                                std::shared_ptr<dist::ProcessGroup> group);

  // `layers` in call order; `replicated` the modules in them with parameters whole over
  // `model`, each with those parameters' local names.
  SequenceParallel(std::vector<nn::Module*> layers,
                   std::vector<std::pair<nn::Module*, std::vector<std::string>>> replicated,
                   std::set<const nn::Module*> inside, std::shared_ptr<dist::ProcessGroup> group);

  // True for a split layer and every module in one.
  bool contains(const nn::Module* m) const { return inside_.count(m) > 0; }

  // Hooks the layers' calls and the replicated parameters' modules; while `bypass()` is true
  // (summon_full_params) the hooks step aside.
  void install(std::vector<autograd::HookHandle>& hooks, std::function<bool()> bypass);

  // For the tensor-parallel Linears inside the split layers: a column-parallel one's product
  // (x this rank's tokens, the output every token's), a row-parallel one's reduce-scatter, and
  // its bias with the gradient all-reduced.
  Tensor column_linear(const Tensor& x, const Tensor& weight, const Tensor& bias);
  Tensor scatter_partial_sums(const Tensor& y);
  Tensor reduced_grad(const Tensor& parameter) const;

 private:
  Tensor call_layer(nn::Module& layer, const Tensor& x, const nn::Module::Inner& inner);
  Tensor call_reducing_grads(nn::Module& m, const std::vector<std::string>& names, const Tensor& x,
                             const nn::Module::Inner& inner) const;
  // This rank's tokens of the current forward's sequence; the error when no first split layer
  // has set them.
  int64_t local_extent() const;

  std::vector<nn::Module*> layers_;
  std::vector<std::pair<nn::Module*, std::vector<std::string>>> replicated_;
  std::set<const nn::Module*> inside_;
  std::shared_ptr<dist::ProcessGroup> group_;
  struct SharedInput;
  // Forgets the last column-parallel input, releasing its gathered tokens.
  void release_input();

  std::vector<int64_t> extents_;  // the ranks' slices of the current forward's sequence
  // The last column-parallel input and what its Linears share, until another input comes or
  // the layer returns: q, k and v (gate and up) read one tensor.
  Tensor last_input_;
  std::shared_ptr<SharedInput> shared_input_;
};

}  // namespace acc::spmd
