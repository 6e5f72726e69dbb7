#pragma once
// FSDP's vocabulary-parallel embedding and loss (fsdp_vocab_parallel): a [V, C] token
// embedding, and the head (tied to it or not), stay split over the shard group by rows of the
// vocabulary and are never gathered. The activations move instead, which are far smaller:
//
//   embedding  the ranks' ids are all-gathered; each rank looks up the ids its rows hold (zero
//              rows for the rest) and a reduce-scatter sums the pieces back to each rank's own
//              tokens. Backward all-gathers the output gradient and adds each row into the
//              rows this rank holds.
//   loss       the ranks' hidden states and labels are all-gathered; each rank computes the
//              logits of its vocabulary rows for every token, a chunk of rows at a time, and an
//              all-gather of two numbers per row (the piece's log-sum-exp, the target's logit
//              where the piece holds it) completes each row's softmax. As in
//              ops::linear_cross_entropy the gradients are made in the forward: the hidden
//              states' partial gradients are reduce-scattered back to their ranks, the rows'
//              weight gradient stays here.
//
// For GPT-2 small at 2 ranks and 4 x 512 tokens per rank, a step moves about 4 x 3.1M floats of
// activations instead of gathering the 38.6M-element table and reduce-scattering its gradient,
// and no rank ever holds the whole table: model state per rank is 16Ψ/N plus the blocks in
// flight. Each rank's loss and gradients are those of plain data parallelism (the mean of its
// own tokens' losses, gradients averaged over the ranks) up to f32 summation order.
#include <functional>
#include <memory>

#include "acc/distributed/process_group.h"
#include "acc/tensor/tensor.h"

namespace acc::parallel {

// This rank's rows [first, first + weight.size(0)) of a [vocab, C] weight.
struct VocabShard {
  std::shared_ptr<dist::ProcessGroup> group;  // the ranks that split the rows (and the batch)
  Tensor weight;        // [rows, C] in the compute dtype; rows may be 0
  int64_t first = 0;
  int64_t vocab = 0;
  bool trainable = true;
  // Receives the rows' gradient [rows, C] f32 in backward, already averaged over the group's
  // ranks as a reduce-scatter would leave it (trainable only). Called once per use. Null (the
  // loss only): `weight` is an autograd input and gets its gradient the usual way.
  std::function<void(const Tensor&)> deliver;
  // Every rank of the group has the same tokens (tensor parallelism over the vocabulary): no
  // gathering; the embedding's pieces and the loss's partial gradients of the hidden states are
  // all-reduced, and `weight` is an autograd input whose gradient is this rank's rows' of the
  // one batch (`deliver` is not used).
  bool replicated_rows = false;
};

// ids (i32 or i64, any shape [...]) of this rank -> [..., C] f32, as ops::embedding over the
// whole table. Every rank of the group must call it in the same order (with replicated rows,
// with the same ids).
Tensor vocab_parallel_embedding(const VocabShard& shard, const Tensor& ids);

// This rank's mean cross-entropy of logits = hidden [N, C] x weight^T against labels [N]
// (ignore_index rows left out), as ops::linear_cross_entropy over the whole weight. Unless the
// rows are replicated, the ranks must back-propagate it with the same upstream gradient
// (loss.backward(), or the same scale on every rank): the weight's gradient sums every rank's
// tokens in one product.
Tensor vocab_parallel_loss(const VocabShard& shard, const Tensor& hidden, const Tensor& labels,
                           int32_t ignore_index);

}  // namespace acc::parallel
