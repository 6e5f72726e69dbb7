#pragma once
// Losses (kernels::cross_entropy).
#include <cstdint>

#include "acc/tensor/tensor.h"

namespace acc::ops {

// The target that marks a row to leave out of the loss (padding), as in PyTorch.
inline constexpr int32_t kIgnoreIndex = -100;

// Mean cross-entropy of logits [N, V] against targets i32 [N] (i64 accepted) over the rows whose
// target is not ignore_index; a scalar []. With every row ignored the loss is 0 and backward sends no
// gradient (it still runs, so a training step over such a batch does not fail).
// grad_dtype is the dtype of the gradient sent back to the logits: bf16 when they come from a
// bf16 product, whose backward would round an f32 gradient to bf16 anyway (same bits, and the
// [N, V] f32 gradient is never written).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int32_t ignore_index = kIgnoreIndex,
                     DType grad_dtype = DType::f32);

// The same loss over logits = x [..., C] · weight [V, C]^T (a bias-free head), without ever
// holding the logits [N, V]: rows are taken `chunk_rows` at a time (0: the default below), and
// while a chunk's logits are at hand their gradient is made and folded into the gradients of
// x and weight at once. The forward therefore also does the head's backward products, and the
// backward only scales what it kept (x's [N, C] and weight's [V, C], f32) by the loss's
// upstream gradient. Peak: one chunk of logits instead of the logits and their gradient,
// 2 N V elements; for GPT-2 small at 8 x 512 tokens that is 1.6 GB less.
// Computes in bf16 when x or weight is bf16 (the logits' gradient then rounded to bf16, as a
// bf16 head's backward would).
Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets,
                            int32_t ignore_index = kIgnoreIndex, int64_t chunk_rows = 0);

// linear_cross_entropy's rows per chunk over a vocabulary of V: about 64 MiB of f32 logits, at
// least 512 rows. The weight's gradient is re-read and re-written once per chunk, so a chunk
// must carry enough products to hide that traffic: at GPT-2 small's head (2048 rows, one
// thread) 256-row chunks cost 6% (f32) and 16% (bf16) over the unfused head, 512 rows 1% and
// 5%, 1024 rows nothing (AMD EPYC, AVX512-BF16).
int64_t default_loss_chunk_rows(int64_t V);

}  // namespace acc::ops
