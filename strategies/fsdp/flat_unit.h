#pragma once
// One FSDP unit: the parameters of a module subtree laid end to end in one flat buffer, padded
// so every rank of the shard group holds an equal, 64-byte aligned shard.
//
//   master     f32 [shard]          this rank's shard, what the optimizer updates
//   grad       f32 [≤ shard]        its gradient, after reduction over every rank: only the part
//                                   of the shard inside the trainable prefix (trainable
//                                   parameters come first; frozen ones need no gradient)
//   compute    bf16 [shard]         the shard in the compute dtype (bf16 only; else = master),
//                                   written by the optimizer in the same pass as master
//   full       compute [padded]     the gathered unit; the model's parameters are views into
//                                   it. With a shard group of one rank it *is* `compute`.
//
// With offload the first three live in an offload tier (allocator.h): master and grad in
// `state_tier` (offload, or file for offload_dir), a bf16 compute shard in host offload memory;
// `full` and the no_sync sum stay in the compute tier.
//
// Releasing `full` returns its bytes (Storage::release) while the views, and the tensors
// autograd saved from them, keep naming the same storage; gather() refills it in place.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "acc/distributed/process_group.h"
#include "acc/nn/module.h"
#include "acc/strategy/sharded_model.h"

namespace acc::fsdp {

struct UnitGroups {
  std::shared_ptr<dist::ProcessGroup> shard;      // ranks that split the unit between them
  std::shared_ptr<dist::ProcessGroup> replicate;  // ranks holding the same shard (hybrid, NO_SHARD)
  // When the shard group spans several nodes and a lever needs them (node copies, int8
  // gradients): its ranks on this rank's node (`node`), and its ranks at this rank's place on
  // every node (`across`, int8 gradients only); null otherwise. Shard-group rank n * L + l is
  // rank l of node n: `node` rank l, `across` rank n.
  std::shared_ptr<dist::ProcessGroup> node = nullptr;
  std::shared_ptr<dist::ProcessGroup> across = nullptr;
  // What the two groups are along the strategy's mesh axes, for the unit's parameter pieces
  // (FSDP: sharded along `shard`, replicated along `replicate`; the ignored modules' unit
  // replicated along both).
  std::vector<ShardedModel::Placement> placements = {};
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

  // How a unit keeps and communicates its shard.
  struct Options {
    DType compute_dtype = DType::f32;
    // Gradients cross the wire in bf16 (fsdp_reduce_dtype: bf16): half the bytes; the reduce
    // kernels still sum in f32 and round once.
    bool reduce_bf16 = false;
    memory::Tier state_tier = memory::Tier::compute;  // the master shard's
    // > 0: every shard is a whole number of rows this long: a unit of one [V, C] parameter
    // split by rows (the vocabulary-parallel embedding and head).
    int64_t row_numel = 0;
    // Elements of gradient one reduction carries at most (fsdp_bucket_mb); 0: the whole unit.
    int64_t bucket_numel = 0;
    // > 0: training gathers over a shard group that spans nodes send the shard
    // block-quantized to int8, a scale per this many elements of a parameter
    // (fsdp_quantize_weights: int8, ZeRO++'s qwZ); 0, or a group inside one node: the compute
    // dtype.
    int64_t quantize_block = 0;
    // How gradient reductions over groups that span nodes cross: quantized (int8 or int4, a
    // scale per block; fsdp_quantize_gradients, ZeRO++'s qgZ) or not (block 0); with
    // UnitGroups::across they reduce inside the node in f32 first and quantize only what
    // crosses nodes.
    dist::ReduceWire gradient_wire;
    // After the forward keep a copy sharded over UnitGroups::node (fsdp_reshard_after_forward:
    // node, ZeRO++'s hpZ).
    bool node_copies = false;
  };

  // Takes `params` (qualified names in `root`) out of the model: copies this rank's part of
  // their values into the master shard and puts views into the gathered buffer in their place.
  FlatUnit(std::string name, nn::Module& root,
           const std::vector<std::pair<std::string, Tensor>>& params, UnitGroups groups, Options options);

  const std::string& name() const { return name_; }
  const std::vector<Slot>& slots() const { return slots_; }
  int64_t shard_numel() const { return shard_; }  // per rank, padding included
  int64_t trainable_numel() const { return trainable_numel_; }  // of the unit, all ranks' parts
  int64_t shard_begin() const;                    // this rank's first flat index
  // The flat indices [first, first + count) of `slot` that rank r's shard holds (count 0 when
  // none); local_part is this rank's.
  struct Part {
    int64_t first = 0, count = 0;
  };
  Part part_of(const Slot& slot, int rank) const;
  // The flat indices [begin, end) and [other_begin, other_end) share (count 0 when none).
  static Part overlap(int64_t begin, int64_t end, int64_t other_begin, int64_t other_end);
  Part local_part(const Slot& slot) const { return part_of(slot, groups_.shard->rank()); }
  const Tensor& master() const { return master_; }
  const Tensor& grad() const { return grad_; }
  const Tensor& compute_shard() const { return compute_; }
  bool sharded() const { return groups_.shard->size() > 1; }
  // Whether training gathers fill `full` with int8-quantized values (Options::quantize_block,
  // cleared for a shard group inside one node).
  bool quantizes_gathers() const { return options_.quantize_block > 0; }
  const UnitGroups& groups() const { return groups_; }

  // --- parameters ---
  // Where the unit's parameters are (FSDP2's sharded state): only this rank's shard, an
  // all-gather into `full` in flight (start_gather), or whole in `full`. Derived from `full`
  // and the gather in flight, which are the state.
  enum class Params { sharded, gathering, gathered };
  Params params() const;
  // True once `full` holds memory: gathered, or being gathered by start_gather().
  bool gathered() const { return params() != Params::sharded; }
  // How a gather fills `full`: as training sends it (block-quantized with quantize_block; the
  // masters themselves are untouched) or exactly, the compute shards (summon_full_params).
  enum class Precision { wire, exact };
  // Issues the all-gather of the shard into `full` and returns (prefetch); no-op when already
  // gathered or in flight. Gathers are urgent (dist::Lane): they touch `full` and the shards,
  // never a gradient, so they may pass the reductions queued before them.
  void start_gather(Precision precision = Precision::wire);
  // start_gather() and wait for it: `full` is complete on return.
  void gather(Precision precision = Precision::wire);
  void release();  // return `full`'s bytes (and any node copy), after any gather in flight
  // After the unit's forward: release, but with a node group first keep this rank's part of
  // `full` among the node's ranks, from which the backward's gather then fills `full` without
  // crossing nodes (hpZ's secondary shard, in the compute dtype).
  void reshard_after_forward();
  void forget_node_copy() { node_copy_ = Tensor(); }
  // Copies this rank's part of the gathered buffer back into the master shard (f32 compute
  // only: a bf16 gathered copy would round the masters). Does not throw.
  void write_back();

  // --- gradients ---
  // Gradients are reduced in buckets: consecutive ranges of the unit's trainable prefix, each
  // at most Options::bucket_numel long. A bucket is reduced, in one collective, as soon as
  // autograd has completed the gradient of every parameter overlapping it: the gradients are
  // kept until then and copied into a bucket-sized buffer for the reduction. So a unit of many
  // small parameters costs one reduction, not one per parameter. (One rank communicates
  // nothing: the gradients go straight into the shard's.)
  // begin_pass runs at the first gradient of a pass; with `accumulate` the reduced gradients
  // are added to what the optimizer kept, else they replace it. A pass without `sync`
  // (no_sync) only sums the gradients into a local unit-sized buffer, whose ranges the next
  // syncing pass reduces as its buckets (with its own gradients added) and then frees.
  //   idle      between passes
  //   summing   a no_sync pass: gradients summed locally, nothing sent
  //   reducing  gradients reduce-scattered into the shards bucket by bucket
  enum class Pass { idle, summing, reducing };
  Pass pass() const { return pass_; }
  void begin_pass(bool accumulate, bool sync);
  // A bucket's reduction in flight: its collectives were issued and run while the rank goes
  // on; land() waits for them and puts the result in the shard's gradient (converting from
  // the bf16 wire, adding to kept gradients). Until then it holds the bucket's gradient.
  class Reduction {
   public:
    int64_t held_bytes() const { return held_.nbytes(); }
    void land();

   private:
    friend class FlatUnit;
    std::vector<std::shared_ptr<dist::Work>> works_;
    Tensor held_, wire_, reduced_, target_;
  };
  // Slot i's gradient: summed locally (no sync), or put into its buckets. Returns the
  // reductions of the buckets it completed: reduce-scattered (average) over the shard group
  // into this rank's part, then all-reduced (average) over the replicate group (each over a
  // quantized wire where Options::gradient_wire says so). Buckets whose collectives had nothing
  // to communicate (one rank) have landed already.
  std::vector<Reduction> take_gradient(size_t i, const Tensor& grad);
  // At the end of a backward in which some trainable parameters got no gradient (a branch
  // not taken): the buckets still open, with those parameters' gradients as zero (or as
  // no_sync passes summed them). Every rank calls it at the same point, so ranks whose
  // branches differ within a unit still issue the same reductions.
  std::vector<Reduction> reduce_open_buckets();
  // A gradient already reduced over the shard group: this rank's part of the trainable prefix
  // (f32), as the vocabulary-parallel ops make it. It may come several times a pass (a tied
  // weight's uses), each added to the pass's sum; only replicas (hybrid) still average it.
  // No_sync passes keep a sum of these parts, which the next syncing pass adds. `part` may be
  // overwritten: the caller hands it over.
  std::optional<Reduction> take_local_gradient(const Tensor& part);
  // Counts one trainable parameter as done; true once every one is.
  bool slot_done();
  void end_pass();

 private:
  std::string name_;
  UnitGroups groups_;
  Options options_;
  memory::Tier shard_tier() const;  // a separate compute shard's
  std::vector<Slot> slots_;
  int64_t shard_ = 0;
  Tensor master_, grad_, compute_, full_;
  std::shared_ptr<dist::Work> gathering_;  // start_gather()'s all-gather, until waited for
  // A quantized gather's messages (int8 values, then f32 scales, as 4-byte words): this rank's
  // and every rank's, dequantized into `full` when it is waited for.
  Tensor quantized_mine_, quantized_all_;
  Tensor node_copy_;  // reshard_after_forward()'s part of `full`, until the gather that uses it
  Tensor node_copy_sending_;  // the same while that gather is in flight
  int64_t quantized_words() const;  // of one rank's message
  // The parts of slots rank r's shard holds, in order: each is quantized in blocks of its own,
  // so no block spans two parameters (a norm's weights of 1 would set the scale of the
  // neighbouring weights of 0.02).
  std::vector<Part> parts_of_rank(int rank) const;
  void dequantize_gathered(const Tensor& messages);  // every rank's, into `full`
  void wait_for_gather();  // no-op when none is in flight
  Tensor local_;  // f32 [trainable prefix]: gradients summed by no_sync passes, not yet reduced
  Tensor local_part_;  // f32 [this rank's part]: take_local_gradient's no_sync sum
  int64_t grad_numel() const;  // this rank's part of the trainable prefix
  bool communicates() const;  // more than this rank shards or replicates the unit
  // [begin, end) of the trainable prefix: reduced once the `needed` trainable slots
  // overlapping it have all `arrived` this pass.
  struct Bucket {
    int64_t begin = 0, end = 0;
    int needed = 0, arrived = 0;
    bool reduced = false;
  };
  std::vector<Bucket> buckets_;
  std::vector<bool> slot_arrived_;  // this pass
  // This pass's gradient of each slot (or its no_sync sum in local_), until every bucket it
  // overlaps has been reduced: a bucket is assembled only when it is reduced.
  std::vector<Tensor> slot_grads_;
  std::pair<size_t, size_t> buckets_of(const Slot& slot) const;  // [first, last] overlapped
  std::optional<Reduction> reduce_bucket(size_t k);
  // Issues r's collectives over `flat`, a pass's gradient of r's target: the reduce-scatter
  // over the shard group (with its counts; none when empty), then the replicas' average.
  // Returns r in flight, or none when there was nothing to communicate (it has landed).
  std::optional<Reduction> issue(Reduction r, const Tensor& flat, const std::vector<int64_t>& scatter_counts);
  // The reduce-scatter of `flat` into `out` in two levels (UnitGroups::node, then ::across).
  void reduce_scatter_over_nodes(Reduction& r, const Tensor& flat, const Tensor& out,
                                 const std::vector<int64_t>& counts);
  // How a reduction over `group` crosses the wire: int8 when it spans nodes and the options
  // ask for it.
  dist::ReduceWire wire_over(const dist::ProcessGroup& group) const;
  int local_parts_ = 0;  // take_local_gradient's calls this pass
  size_t trainable_ = 0;  // slots whose parameter requires grad: the gradients a pass waits for
  int64_t trainable_numel_ = 0;  // the flat prefix the trainable slots fill
  size_t arrived_ = 0;
  Pass pass_ = Pass::idle;
  bool accumulate_ = false;  // this pass adds to the gradients the optimizer kept
};

}  // namespace acc::fsdp
