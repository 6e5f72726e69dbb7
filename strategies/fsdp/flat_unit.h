#pragma once
// One FSDP unit: the parameters of a module subtree laid end to end in one flat buffer, padded
// so every rank of the shard group holds an equal, 64-byte aligned shard.
//
//   master     f32 [shard]          this rank's shard, what the optimizer updates
//   grad       f32 [shard]          its gradient, after reduction over every rank
//   compute    bf16 [shard]         the shard in the compute dtype (bf16 only; else = master),
//                                   written by the optimizer in the same pass as master
//   full       compute [padded]     the gathered unit; the model's parameters are views into
//                                   it. With a shard group of one rank it *is* `compute`.
//   full_grad  f32 [padded]         exists only during backward: the views' gradients land here.
//                                   Unsharded and not accumulating, it *is* `grad` (no copy).
//
// Releasing `full` returns its bytes (Storage::release) while the views, and the tensors
// autograd saved from them, keep naming the same storage; gather() refills it in place.
#include <memory>
#include <string>
#include <vector>

#include "acc/dist/process_group.h"
#include "acc/nn/module.h"

namespace acc::fsdp {

struct UnitGroups {
  std::shared_ptr<dist::ProcessGroup> shard;      // ranks that split the unit between them
  std::shared_ptr<dist::ProcessGroup> replicate;  // ranks holding the same shard (hybrid, NO_SHARD)
};

class FlatUnit {
 public:
  // One of the unit's original parameters, at [offset, offset + numel) of the flat buffer.
  struct Slot {
    std::string name;  // qualified name in the root model
    Shape shape;
    int64_t offset = 0;
    Tensor view;       // the model's parameter now: a view into `full`
  };

  // Takes `params` (qualified names in `root`) out of the model: copies this rank's part of
  // their values into the master shard and puts views into the gathered buffer in their place.
  FlatUnit(std::string name, nn::Module& root,
           const std::vector<std::pair<std::string, Tensor>>& params, UnitGroups groups,
           DType compute_dtype);

  const std::string& name() const { return name_; }
  const std::vector<Slot>& slots() const { return slots_; }
  int64_t numel() const { return numel_; }        // sum of the parameters' sizes
  int64_t shard_numel() const { return shard_; }  // per rank, padding included
  int64_t shard_begin() const;                    // this rank's first flat index
  const Tensor& master() const { return master_; }
  const Tensor& grad() const { return grad_; }
  const Tensor& compute_shard() const { return compute_; }
  bool sharded() const { return groups_.shard->size() > 1; }
  const UnitGroups& groups() const { return groups_; }

  // --- parameters ---
  bool gathered() const { return !full_.storage()->released(); }
  void gather();   // all-gather the compute shard into `full` (no-op when already there)
  void release();  // return `full`'s bytes (no-op for an unsharded unit)

  // --- gradients ---
  // Called when the first gradient of a backward pass reaches one of the unit's parameters:
  // points every view's .grad into a zeroed full_grad. With `accumulate` the reduced result is
  // added to the shard's gradient (the optimizer kept it), else it replaces it.
  void begin_gradients(bool accumulate);
  bool collecting_gradients() const { return full_grad_.defined(); }
  // Records one parameter's gradient as complete; true once every trainable one is.
  bool gradient_arrived();
  // Reduces full_grad over the shard group (reduce-scatter, average) and the replicate group
  // (all-reduce, average) into the shard's gradient; frees full_grad and detaches the views'
  // gradients.
  void reduce_gradients();
  // Forgets a backward pass's gradients without reducing them (a pass that failed midway).
  void drop_gradients();

 private:
  std::string name_;
  UnitGroups groups_;
  DType compute_dtype_;
  std::vector<Slot> slots_;
  int64_t numel_ = 0, shard_ = 0;
  Tensor master_, grad_, compute_, full_, full_grad_;
  size_t arrived_ = 0;
  bool accumulate_ = false;
};

}  // namespace acc::fsdp
