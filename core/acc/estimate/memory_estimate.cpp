#include "acc/estimate/memory_estimate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "acc/distributed/staging_copy.h"
#include "acc/kernels/matmul.h"
#include "acc/memory/allocator.h"
#include "acc/ops/loss.h"

namespace acc::estimate {

namespace {

// What a transformer block saves for backward, per token, in f32 elements (4 bytes).
// The coefficients are what acc's ops keep, found by measuring each op (tests/distributed/fsdp/
// estimate_test.cpp checks them): GPT-2 keeps 17 C (bf16: 13.5 C: the matmul inputs are bf16)
// plus attention's log-sum-exp (H) and the norms' statistics; Llama keeps 7 C + 3 I + 2 kv
// (bf16: 2.5 I). Split over `model_ranks` tensor-parallel ranks, the attention heads' and the
// MLP's hidden units' share of those (GPT-2: q, k, v, the attention output and the MLP's two
// 4 C activations, 12 of the 17 C; Llama: q, its rotation and the attention output, 3 of the
// 7 C) is divided among them, the residual stream and the norms' are not; `s` then gives the
// heads, kv width and intermediate size one rank computes.
double block_saved_per_token(const ModelShape& s, bool bf16, int model_ranks = 1) {
  const auto C = static_cast<double>(s.hidden), I = static_cast<double>(s.intermediate),
             kv = static_cast<double>(s.kv_hidden), H = static_cast<double>(s.heads);
  const auto t = static_cast<double>(model_ranks);
  if (s.family == Family::gpt2) {
    const double whole = bf16 ? 4.0 : 5.0, split = bf16 ? 9.5 : 12.0;
    return (whole + split / t) * C + H + (bf16 ? 5.0 : 4.0);
  }
  return (4.0 + 3.0 / t) * C + (bf16 ? 2.5 : 3.0) * I + 2.0 * kv + H + (bf16 ? 3.0 : 2.0);
}

// Outside the blocks: the embeddings' sum and the final norm (2 C, bf16 1.5 C) and the
// loss's per-token statistics.
double head_saved_per_token(const ModelShape& s, bool bf16) {
  return (bf16 ? 1.5 : 2.0) * static_cast<double>(s.hidden) + 3.0;
}

}  // namespace

double block_bytes_per_token(const ModelShape& s, bool bf16, int model_ranks) {
  return 4.0 * block_saved_per_token(s, bf16, model_ranks);
}
double head_bytes_per_token(const ModelShape& s, bool bf16) { return 4.0 * head_saved_per_token(s, bf16); }

double weight_part_bytes_per_token(const ModelShape& s, bool bf16, int model_ranks) {
  const auto C = static_cast<double>(s.hidden), I = static_cast<double>(s.intermediate),
             kv = static_cast<double>(s.kv_hidden);
  const auto t = static_cast<double>(model_ranks);
  // A linear's input and the gradient of its output, both in the compute dtype (the first part
  // casts the gradient and keeps the cast, autograd::keep_for_later_call).
  const double bytes = bf16 ? 2.0 : 4.0;
  if (s.family == Family::gpt2)
    // Inputs: the two norms' outputs (whole), the attention output and the GELU's 4 C (split);
    // output gradients: q, k, v and the MLP's 4 C (split), the two projections' C (whole).
    return bytes * ((2.0 + 5.0 / t) * C + (2.0 + 7.0 / t) * C);
  // Inputs: the two norms' outputs, the attention output (C / t) and the MLP's activation (I);
  // output gradients: q (C / t), k and v (kv each), gate and up (I each), the two projections'.
  return bytes * ((2.0 + 1.0 / t) * C + I + (2.0 + 1.0 / t) * C + 2.0 * kv + 2.0 * I);
}

Memory training_state(int64_t held, bool bf16) {
  Memory m;
  m.parameters = (bf16 ? 6 : 4) * held;
  m.gradients = 4 * held;
  m.optimizer_state = 8 * held;
  return m;
}

int64_t activation_bytes(const ModelShape& s, int64_t batch_per_rank, int64_t seq, bool bf16,
                         bool activation_checkpointing, int vocab_ranks) {
  if (s.family == Family::other || batch_per_rank <= 0 || seq <= 0) return 0;
  const auto tokens = static_cast<double>(batch_per_rank * seq);
  const double block = tokens * block_saved_per_token(s, bf16);
  const double head = tokens * head_saved_per_token(s, bf16);
  // The loss (ops::linear_cross_entropy) makes the head's gradients in its forward: one chunk
  // of f32 logits at a time (bf16: also its bf16 gradient, and a bf16 copy of the hidden
  // states), and the gradients of the hidden states [tokens, C] and of the head weight [V, C],
  // f32, held until backward.
  const auto V = static_cast<double>(s.vocab), C = static_cast<double>(s.hidden);
  const bool tied = s.family == Family::gpt2;
  // Without native bf16 a bf16 product widens both operands to f32 for its duration
  // (kernels/matmul.h). The largest such product of the loss is dx = dlogits W (a chunk's
  // logits and the head's rows); a block's are the backward products of its largest matrix.
  const bool widens = bf16 && !kernels::has_native_bf16();
  double loss_forward = 0, tied_wait = 0, embedding_end = 0;
  if (vocab_ranks > 1) {
    // Split by vocabulary rows (fsdp/vocab_parallel.h): this rank's rows over every rank's
    // tokens. The gathered hidden states (bf16: and their bf16 copy), one chunk of logits
    // (bf16: and their bf16 gradient), every token's partial dx, and, held until backward,
    // this rank's dx and its rows' weight gradient. That gradient goes to the shard when the
    // backward starts (nothing waits through the blocks); at the end the embedding's backward
    // gathers every token's output gradient and sums it into its rows.
    const auto n = static_cast<double>(vocab_ranks);
    const double rows = std::ceil(V / n), all_tokens = n * tokens;
    const double chunk = std::min(all_tokens, static_cast<double>(ops::default_loss_chunk_rows(static_cast<int64_t>(rows))));
    loss_forward = chunk * rows * (bf16 ? 1.5 : 1.0) + all_tokens * C * (bf16 ? 2.5 : 2.0) + tokens * C + rows * C +
                   (widens ? chunk * rows + rows * C : 0.0);
    embedding_end = all_tokens * C + rows * C;
  } else {
    const double chunk = std::min(tokens, static_cast<double>(ops::default_loss_chunk_rows(s.vocab)));
    const double head_weight_grad = V * C;
    loss_forward = chunk * V * (bf16 ? 1.5 : 1.0) + tokens * C * (bf16 ? 1.5 : 1.0) + head_weight_grad +
                   (widens ? chunk * V + V * C : 0.0);
    // A tied head's gradient then waits for the embedding's, through every block.
    tied_wait = tied ? head_weight_grad : 0.0;
    // At the end the embedding's backward makes the tied weight's second gradient, summed into
    // the first in place: two [V, C] f32 tensors (measured); with few tokens per rank, and
    // chunks as small as they, this is the step's peak.
    embedding_end = tied ? 2.0 * head_weight_grad : 0.0;
  }
  // A block's backward holds its largest weight's f32 gradient and a few [T, C] gradients.
  // Widened, the largest matrix's backward products: dx = dy W holds dy [T, out] and W, dW =
  // dy^T x holds dy and x [T, in], where {in, out} = {C, I} in either family.
  const auto I = static_cast<double>(s.intermediate), matrix = static_cast<double>(s.largest_block_matrix);
  const double block_widened = widens ? std::max(tokens * std::max(C, I) + matrix, tokens * (C + I)) : 0.0;
  const double block_transient = matrix + 3.0 * tokens * C + block_widened;
  const auto L = static_cast<double>(s.layers);
  double elements = 0;
  if (activation_checkpointing) {
    // Each block keeps only its input; backward re-runs one block at a time.
    const double kept = tokens * static_cast<double>(s.hidden) * L + head;
    elements = std::max(kept + std::max(loss_forward, block + block_transient + tied_wait),
                        embedding_end);
  } else {
    elements = std::max(L * block + head + std::max(loss_forward, block_transient + tied_wait),
                        embedding_end);
  }
  return static_cast<int64_t>(4.0 * elements);
}

int64_t async_checkpoint_bytes(const ModelShape& shape, const Workload& w) {
  return 12 * shape.parameters / std::max(1, w.world);
}

int64_t communication_bytes(const Workload& w) { return group_channel_bytes(w.world, w); }

int64_t group_channel_bytes(int ranks, const Workload& w) {
  // The OpenMPI plugin's shared-memory channel: two staging buffers per rank of the group on
  // the node; with more than one node in the job, a second channel for the urgent lane. Beside
  // it the point-to-point mailbox (groups of up to 16 ranks): 64 bytes a rank, and from each
  // rank to each a 64-byte header and 64 slots of 128 bytes.
  if (ranks < 2) return 0;
  const int node = std::max(1, w.ranks_per_node), lanes = w.world > node ? 2 : 1;
  const int64_t local = std::min(ranks, node);
  return 2 * lanes * static_cast<int64_t>(dist::staging_buffer_bytes()) * local +
         (local <= 16 ? local * 64 + local * local * (64 + 64 * 128) : 0);
}

int64_t default_memory_limit(int ranks_per_node) {
  return memory::physical_memory_bytes() / std::max(1, ranks_per_node);
}

std::string format_bytes(int64_t bytes) {
  const auto b = static_cast<double>(bytes);
  char text[32];
  if (bytes == 0) return "0";
  if (b >= double(1 << 30)) std::snprintf(text, sizeof text, "%.2f GiB", b / double(1 << 30));
  else if (b >= double(1 << 20)) std::snprintf(text, sizeof text, "%.1f MiB", b / double(1 << 20));
  else std::snprintf(text, sizeof text, "%lld KiB", static_cast<long long>(bytes >> 10));
  return text;
}

}  // namespace acc::estimate
