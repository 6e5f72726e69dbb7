#include "vocab_parallel.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "acc/autograd/function.h"
#include "acc/autograd/grad_mode.h"
#include "acc/autograd/row_gradients.h"
#include "acc/kernels/convert.h"
#include "acc/kernels/cross_entropy.h"
#include "acc/kernels/matmul.h"
#include "acc/memory/allocator.h"
#include "acc/ops/loss.h"
#include "acc/optim/clip_grad.h"
#include "acc/util/profiler.h"
#include "acc/util/strings.h"

namespace acc::parallel {

namespace {

// Tokens (rows) each rank of the group has this step, in rank order.
std::vector<int64_t> rows_per_rank(dist::ProcessGroup& group, int64_t rows) {
  Tensor all = Tensor::empty({group.size()}, DType::i64);
  group.all_gather(Tensor::from_vector_i64({rows}, {1}), all);
  const auto* p = all.data<int64_t>();
  return {p, p + group.size()};
}

std::vector<int64_t> times(const std::vector<int64_t>& counts, int64_t width) {
  std::vector<int64_t> out;
  for (int64_t c : counts) out.push_back(c * width);
  return out;
}

// Every rank's rows of `mine` [rows, width], in rank order: [sum(counts), width].
Tensor gather_rows(dist::ProcessGroup& group, const Tensor& mine, const std::vector<int64_t>& counts,
                   int64_t width) {
  Tensor all = Tensor::empty({std::accumulate(counts.begin(), counts.end(), int64_t{0}), width}, mine.dtype());
  group.all_gather_v(mine.view({mine.numel()}), all.view({all.numel()}), times(counts, width));
  return all;
}

Tensor as_i32(const Tensor& ids) {
  return (ids.dtype() == DType::i32 ? ids.detach() : ids.to(DType::i32)).view({ids.numel()});
}

// Row i of `rows` [n, C] in f32, whatever the weight's dtype.
void copy_row(const Tensor& rows, int64_t i, int64_t C, float* out) {
  if (rows.dtype() == DType::bf16)
    kernels::bf16_to_f32(rows.data<bfloat16>() + i * C, out, C);
  else
    std::copy_n(rows.data<float>() + i * C, C, out);
}

}  // namespace

namespace {

// Checks ids [M] against the vocabulary; `where(i)` names position i for the message.
void check_ids(const int32_t* id, int64_t M, int64_t vocab, const std::function<std::string(int64_t)>& where) {
  for (int64_t i = 0; i < M; ++i)
    ACC_CHECK(id[i] >= 0 && id[i] < vocab, "embedding: id ", id[i], " at ", where(i), " is outside [0, ", vocab, ")");
}

// [M, C] f32: this rank's row where it holds the id, zeros elsewhere; the sum over the ranks of
// the group is the lookup in the whole table.
Tensor own_rows(const VocabShard& shard, const int32_t* id, int64_t M, int64_t C) {
  Tensor pieces = Tensor::empty({M, C});
  const int64_t rows = shard.weight.size(0);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, M, 64), [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t i = r.begin(); i < r.end(); ++i) {
      float* out = pieces.data<float>() + i * C;
      const int64_t local = id[i] - shard.first;
      if (local >= 0 && local < rows)
        copy_row(shard.weight, local, C, out);
      else
        std::fill(out, out + C, 0.f);
    }
  });
  return pieces;
}

// Adds the gradient of this rank's rows from the output gradient `grad` [M, C] f32 into dw
// [rows, C] f32.
void add_own_rows_grad(const VocabShard& shard, const int32_t* id, const Tensor& grad, int64_t C, const Tensor& dw) {
  const int64_t rows = shard.weight.size(0), M = grad.size(0);
  // Column blocks in parallel, every row in order within one: deterministic sums.
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, C, 64), [&](const tbb::blocked_range<int64_t>& cols) {
    for (int64_t i = 0; i < M; ++i) {
      const int64_t local = id[i] - shard.first;
      if (local < 0 || local >= rows) continue;
      const float* g = grad.data<float>() + i * C;
      float* d = dw.data<float>() + local * C;
      for (int64_t c = cols.begin(); c < cols.end(); ++c) d[c] += g[c];
    }
  });
}

// The gradient [rows, C] f32 of this rank's rows from the output gradient `grad` [M, C] f32.
Tensor own_rows_grad(const VocabShard& shard, const int32_t* id, const Tensor& grad, int64_t C) {
  Tensor dw = Tensor::zeros({shard.weight.size(0), C});
  add_own_rows_grad(shard, id, grad, C, dw);
  return dw;
}

Tensor as_f32(const Tensor& t) { return t.dtype() == DType::f32 ? t.detach() : t.to(DType::f32); }

// Tensor parallelism: the ranks of the group hold the same ids. The pieces are all-reduced, and
// the output's gradient, the same on every rank too, goes into this rank's rows with no
// communication; the weight is an autograd input.
Tensor replicated_rows_embedding(const VocabShard& shard, const Tensor& ids, const Shape& out_shape) {
  const int64_t C = shard.weight.size(1);
  auto forward = [shard, ids, C, out_shape](autograd::FunctionContext&, const std::vector<Tensor>&) {
    ACC_PROFILE("vocab_parallel_embedding");
    memory::CategoryScope scope(memory::Category::activations);
    const int32_t* id = ids.data<int32_t>();
    check_ids(id, ids.numel(), shard.vocab, [](int64_t i) { return "position " + std::to_string(i); });
    Tensor out = own_rows(shard, id, ids.numel(), C);
    shard.group->all_reduce(out);
    return out.view(out_shape);
  };
  auto backward = [shard, ids, C](autograd::FunctionContext&, const Tensor& grad) -> std::vector<Tensor> {
    ACC_PROFILE("vocab_parallel_embedding.backward");
    memory::CategoryScope scope(memory::Category::activations);
    const Tensor rows = as_f32(grad).view({ids.numel(), C});
    // A caller summing the table's gradient itself gets the rows added there (row_gradients.h).
    if (const Tensor sum = autograd::RowGradients::sum_for(shard.weight.impl().get(), shard.weight.shape());
        sum.defined()) {
      add_own_rows_grad(shard, ids.data<int32_t>(), rows, C, sum);
      return {Tensor()};
    }
    return {own_rows_grad(shard, ids.data<int32_t>(), rows, C)};
  };
  if (!shard.trainable) {
    autograd::FunctionContext ctx;
    return forward(ctx, {});
  }
  return autograd::apply_function("VocabParallelEmbedding", {shard.weight}, forward, backward);
}

}  // namespace

Tensor vocab_parallel_embedding(const VocabShard& shard, const Tensor& ids_in) {
  ACC_CHECK(ids_in.dtype() == DType::i32 || ids_in.dtype() == DType::i64,
            "vocabulary-parallel embedding: ids must be i32 or i64, got ", ids_in.describe());
  const Tensor ids = as_i32(ids_in);
  const int64_t C = shard.weight.size(1);
  Shape out_shape = ids_in.shape();
  out_shape.push_back(C);
  if (shard.replicated_rows) return replicated_rows_embedding(shard, ids, out_shape);
  auto forward = [shard, ids, C, out_shape](autograd::FunctionContext& ctx, const std::vector<Tensor>&) {
    ACC_PROFILE("vocab_parallel_embedding");
    memory::CategoryScope scope(memory::Category::activations);
    dist::ProcessGroup& group = *shard.group;
    const auto counts = rows_per_rank(group, ids.numel());
    const Tensor all_ids = gather_rows(group, ids.view({ids.numel(), 1}), counts, 1);
    const int32_t* id = all_ids.data<int32_t>();
    const int64_t M = all_ids.numel();
    check_ids(id, M, shard.vocab, [&](int64_t i) {
      int64_t k = 0, begin = 0;
      while (i >= begin + counts[static_cast<size_t>(k)]) begin += counts[static_cast<size_t>(k++)];
      return "position " + std::to_string(i - begin) + " of rank " + std::to_string(k) + "'s batch";
    });
    Tensor pieces = own_rows(shard, id, M, C);
    Tensor out = Tensor::empty(out_shape);
    group.reduce_scatter_v(pieces.view({pieces.numel()}), out.view({out.numel()}), times(counts, C));
    ctx.saved = {all_ids, Tensor::from_vector_i64(counts, {group.size()})};
    return out;
  };
  auto backward = [shard, C](autograd::FunctionContext& ctx, const Tensor& grad) -> std::vector<Tensor> {
    ACC_PROFILE("vocab_parallel_embedding.backward");
    memory::CategoryScope scope(memory::Category::activations);
    dist::ProcessGroup& group = *shard.group;
    const Tensor& all_ids = ctx.saved[0];
    const auto* n = ctx.saved[1].data<int64_t>();
    const std::vector<int64_t> counts(n, n + group.size());
    const Tensor mine = as_f32(grad);
    const Tensor all = gather_rows(group, mine.view({mine.numel() / C, C}), counts, C);
    Tensor dw = own_rows_grad(shard, all_ids.data<int32_t>(), all, C);
    optim::scale_grad(dw, 1.0 / group.size());  // the average over ranks, as FSDP reduces
    shard.deliver(dw);
    return {};
  };
  if (!shard.trainable) {  // nothing to send back: the lookup alone
    autograd::FunctionContext ctx;
    return forward(ctx, {});
  }
  return autograd::apply_function("VocabParallelEmbedding", {}, forward, backward, {.always_record = true});
}

Tensor vocab_parallel_loss(const VocabShard& shard, const Tensor& hidden_in, const Tensor& labels_in,
                           int32_t ignore_index) {
  const int64_t C = shard.weight.size(1);
  ACC_CHECK(hidden_in.dim() == 2 && hidden_in.size(1) == C && labels_in.numel() == hidden_in.size(0) &&
                (labels_in.dtype() == DType::i32 || labels_in.dtype() == DType::i64),
            "vocabulary-parallel loss: expected hidden [N, ", C, "] and integer labels [N], got hidden ",
            hidden_in.describe(), " and labels ", labels_in.describe());
  const Tensor labels = as_i32(labels_in);
  auto dx_work = std::make_shared<std::shared_ptr<dist::Work>>();
  const bool replicated = shard.replicated_rows;
  const bool grads = autograd::GradMode::is_enabled();  // else the loss alone (evaluation)
  auto forward = [shard, labels, C, ignore_index, dx_work, replicated, grads](autograd::FunctionContext& ctx,
                                                                      const std::vector<Tensor>& in) {
    ACC_PROFILE("vocab_parallel_loss");
    memory::CategoryScope scope(memory::Category::activations);
    dist::ProcessGroup& group = *shard.group;
    const int ranks = group.size();
    const Tensor& hidden = in[0];
    // The batches the rows come from, in rank order; replicated: the one every rank has.
    const auto counts = replicated ? std::vector<int64_t>{hidden.size(0)} : rows_per_rank(group, hidden.size(0));
    const int batches = static_cast<int>(counts.size()), me = replicated ? 0 : group.rank();
    const Tensor all_labels =
        replicated ? labels : gather_rows(group, labels.view({labels.numel(), 1}), counts, 1);
    const int32_t* t = all_labels.data<int32_t>();
    std::vector<int64_t> kept(static_cast<size_t>(batches));
    std::vector<float> row_weight;  // 1 / (batch's kept rows): each rank's loss is its own mean
    for (int k = 0, at = 0; k < batches; at += static_cast<int>(counts[static_cast<size_t>(k)]), ++k) {
      const std::string op = "loss (labels of rank " + std::to_string(k) + ")";
      const int64_t n = counts[static_cast<size_t>(k)];
      kept[static_cast<size_t>(k)] = kernels::count_and_check_targets(op.c_str(), t + at, n, shard.vocab, ignore_index);
      row_weight.insert(row_weight.end(), static_cast<size_t>(n),
                        kept[static_cast<size_t>(k)] ? 1.f / static_cast<float>(kept[static_cast<size_t>(k)]) : 0.f);
    }
    const DType dtype = shard.weight.dtype() == DType::bf16 || hidden.dtype() == DType::bf16 ? DType::bf16 : DType::f32;
    Tensor x = replicated ? hidden.detach() : gather_rows(group, hidden.detach(), counts, C);
    if (x.dtype() != dtype) x = x.to(dtype);
    const int64_t M = x.size(0), V = shard.weight.size(0);  // V: this rank's vocabulary rows
    const bool trainable = shard.trainable && grads;
    const int64_t R = std::max<int64_t>(1, std::min(M, ops::default_loss_chunk_rows(std::max<int64_t>(V, 1))));
    Tensor logits = Tensor::empty({R, V});  // one chunk; its f32 gradient is written in place
    Tensor dlogits_bf16 = dtype == DType::bf16 ? Tensor::empty({R, V}, DType::bf16) : Tensor();
    Tensor piece_stats = Tensor::empty({R, 2}), all_stats = Tensor::empty({ranks, R, 2});
    std::vector<float> lse(static_cast<size_t>(R)), dloss(static_cast<size_t>(R));
    Tensor dx_parts = grads ? Tensor::zeros({M, C}) : Tensor();  // this rank's rows' share of each dx row
    Tensor dw = trainable ? Tensor::zeros({V, C}) : Tensor();
    const size_t row_bytes = static_cast<size_t>(C) * dtype_size(dtype);
    double own_total = 0;
    const int64_t own_first = std::accumulate(counts.begin(), counts.begin() + me, int64_t{0});
    for (int64_t r0 = 0; r0 < M; r0 += R) {
      const int64_t rows = std::min(R, M - r0);
      const auto* xr = static_cast<const char*>(x.raw_data()) + static_cast<size_t>(r0) * row_bytes;
      float* l = logits.data<float>();
      float* stats = piece_stats.data<float>();
      if (V > 0)
        kernels::matmul(xr, shard.weight.raw_data(), l,
                        {.M = rows, .N = V, .K = C, .trans_b = true, .ab_type = dtype});
      kernels::logsumexp_rows(l, lse.data(), rows, V);
      for (int64_t i = 0; i < rows; ++i) {
        const int64_t local = t[r0 + i] - shard.first;  // ignore_index is negative: never local
        stats[2 * i] = lse[static_cast<size_t>(i)];
        stats[2 * i + 1] = local >= 0 && local < V ? l[i * V + local] : 0.f;
      }
      // Every rank's (log-sum-exp, target logit) of these rows: the whole rows' softmax.
      group.all_gather(piece_stats.slice_flat(0, {2 * rows}), all_stats.slice_flat(0, {ranks * 2 * rows}));
      const float* s = all_stats.data<float>();
      for (int64_t i = 0; i < rows; ++i) {
        float m = -std::numeric_limits<float>::infinity();
        for (int k = 0; k < ranks; ++k) m = std::max(m, s[k * 2 * rows + 2 * i]);
        double sum = 0, target = 0;
        for (int k = 0; k < ranks; ++k) {
          sum += std::exp(static_cast<double>(s[k * 2 * rows + 2 * i]) - m);
          target += s[k * 2 * rows + 2 * i + 1];
        }
        lse[static_cast<size_t>(i)] = m + static_cast<float>(std::log(sum));
        const bool ignored = t[r0 + i] == ignore_index;
        dloss[static_cast<size_t>(i)] = ignored ? 0.f : row_weight[static_cast<size_t>(r0 + i)];
        if (!ignored && r0 + i >= own_first && r0 + i < own_first + counts[static_cast<size_t>(me)])
          own_total += static_cast<double>(lse[static_cast<size_t>(i)] - static_cast<float>(target));
      }
      if (V == 0 || !grads) continue;
      void* grad = l;
      if (dtype == DType::bf16) {
        grad = dlogits_bf16.raw_data();
        kernels::cross_entropy_bwd_columns(l, t + r0, shard.first, lse.data(), dloss.data(),
                                           static_cast<bfloat16*>(grad), rows, V, ignore_index);
      } else {
        kernels::cross_entropy_bwd_columns(l, t + r0, shard.first, lse.data(), dloss.data(), l, rows,
                                           V, ignore_index);
      }
      kernels::matmul(grad, shard.weight.raw_data(), dx_parts.data<float>() + r0 * C,
                      {.M = rows, .N = C, .K = V, .ab_type = dtype});
      if (trainable)
        kernels::matmul(grad, xr, dw.raw_data(),
                        {.M = V, .N = C, .K = rows, .trans_a = true, .ab_type = dtype, .accumulate = true});
    }
    const auto mine = static_cast<size_t>(me);
    Tensor out = Tensor::empty({});
    *out.data<float>() = kept[mine] ? static_cast<float>(own_total / static_cast<double>(kept[mine])) : 0.f;
    // The chunk buffers go now; the gradients stay until backward hands them on. Each dx row is
    // the sum of every rank's part: reduce-scattered to the row's rank (all-reduced when the
    // rows are replicated) while the step goes on.
    logits = dlogits_bf16 = x = Tensor();
    if (!grads) return out;
    Tensor dx = replicated ? dx_parts : Tensor::empty({counts[mine], C});
    *dx_work = replicated ? group.all_reduce_async(dx_parts.view({dx_parts.numel()}))
                          : group.reduce_scatter_v_async(dx_parts.view({dx_parts.numel()}),
                                                         dx.view({dx.numel()}), times(counts, C));
    ctx.saved = {dx, dw};
    return out;
  };
  auto backward = [shard, dx_work, replicated](autograd::FunctionContext& ctx, const Tensor& grad) -> std::vector<Tensor> {
    ACC_PROFILE("vocab_parallel_loss.backward");
    dist::ProcessGroup& group = *shard.group;
    const float g = grad.item();
    if (!replicated) {
      Tensor scales = Tensor::empty({group.size()});
      group.all_gather(Tensor::from_vector({g}, {1}), scales);
      for (float other : scales.to_vector())
        ACC_CHECK(other == g, "FSDP's vocabulary-parallel loss: the ranks back-propagated their losses "
                  "with different scales (", util::join(scales.to_vector(), ", "), "); the head's "
                  "weight gradient sums every rank's tokens in one product and takes one scale. "
                  "Scale the loss alike on every rank, or set fsdp_vocab_parallel: false");
    }
    std::exchange(*dx_work, nullptr)->wait();
    Tensor dx = ctx.saved[0], dw = ctx.saved[1];
    // Gathered rows: the weight's gradient is averaged over the ranks whose tokens it summed.
    if (dw.defined()) optim::scale_grad(dw, replicated ? g : static_cast<double>(g) / group.size());
    if (dw.defined() && shard.deliver) shard.deliver(dw);
    if (g != 1.f && ctx.needs_input_grad[0]) optim::scale_grad(dx, g);
    std::vector<Tensor> grads{ctx.needs_input_grad[0] ? dx : Tensor()};
    if (!shard.deliver) grads.push_back(ctx.needs_input_grad[1] ? dw : Tensor());
    return grads;
  };
  // Without a receiver the weight is an input, whose gradient autograd hands on.
  std::vector<Tensor> inputs{hidden_in};
  if (!shard.deliver) inputs.push_back(shard.weight);
  return autograd::apply_function("VocabParallelLoss", inputs, forward, backward,
                                  {.always_record = shard.trainable && shard.deliver != nullptr});
}

}  // namespace acc::parallel
