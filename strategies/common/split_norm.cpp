#include "split_norm.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <cmath>
#include <vector>

#include "acc/autograd/function.h"
#include "acc/memory/allocator.h"
#include "acc/ops/shape.h"
#include "acc/util/error.h"
#include "acc/util/profiler.h"

namespace acc::parallel {

namespace {

enum class Norm { layer, rms };

Tensor as_f32(const Tensor& t) { return t.dtype() == DType::f32 ? t.detach() : ops::cast(t, DType::f32).detach(); }

// Per row, `width` (1 or 2) sums over this rank's columns (fn(row, sums) adds into sums, in
// double), then summed over the group: [rows, width] f32.
template <class Fn>
Tensor summed_rows(int64_t rows, int width, dist::ProcessGroup& group, Fn&& fn) {
  Tensor sums = Tensor::empty({rows, width});
  float* out = sums.data<float>();
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, 64), [&](const tbb::blocked_range<int64_t>& r) {
    for (int64_t i = r.begin(); i < r.end(); ++i) {
      double acc[2] = {0, 0};
      fn(i, acc);
      for (int k = 0; k < width; ++k) out[i * width + k] = static_cast<float>(acc[k]);
    }
  });
  if (group.size() > 1) group.all_reduce(sums.view({sums.numel()}));
  return sums;
}

Tensor split_norm(Norm norm, const Tensor& x_in, const Tensor& gamma_in, const Tensor& beta_in, double eps,
                  int64_t cols, const std::shared_ptr<dist::ProcessGroup>& group) {
  const char* op = norm == Norm::layer ? "split_layer_norm" : "split_rms_norm";
  ACC_CHECK(x_in.defined() && x_in.dim() >= 1 && gamma_in.defined(), op, ": needs x [..., c] and gamma [c]");
  const int64_t c = x_in.size(-1);
  ACC_CHECK(gamma_in.shape() == Shape{c} && (!beta_in.defined() || beta_in.shape() == Shape{c}), op,
            ": gamma ", gamma_in.describe(), " and beta must hold x's ", c, " columns (x ", x_in.describe(), ")");
  ACC_CHECK(cols >= c && cols > 0, op, ": the whole row has ", cols, " columns, fewer than this rank's ", c);
  const int64_t rows = c > 0 ? x_in.numel() / c : 0;
  const double inv_cols = 1.0 / static_cast<double>(cols);
  std::vector<Tensor> inputs{x_in, gamma_in};
  if (beta_in.defined()) inputs.push_back(beta_in);

  auto forward = [=](autograd::FunctionContext& ctx, const std::vector<Tensor>& in) {
    ACC_PROFILE(op);
    memory::CategoryScope activations(memory::Category::activations);
    const Tensor x = as_f32(in[0]), gamma = as_f32(in[1]), beta = in.size() > 2 ? as_f32(in[2]) : Tensor();
    const float* xp = x.data<float>();
    Tensor mean = Tensor::zeros({rows});
    float* mu = mean.data<float>();
    if (norm == Norm::layer) {
      const Tensor sums = summed_rows(rows, 1, *group, [&](int64_t i, double* s) {
        for (int64_t j = 0; j < c; ++j) s[0] += xp[i * c + j];
      });
      for (int64_t i = 0; i < rows; ++i) mu[i] = static_cast<float>(sums.data<float>()[i] * inv_cols);
    }
    const Tensor squares = summed_rows(rows, 1, *group, [&](int64_t i, double* s) {
      for (int64_t j = 0; j < c; ++j) {
        const double d = xp[i * c + j] - mu[i];
        s[0] += d * d;
      }
    });
    Tensor rstd = Tensor::empty({rows});
    for (int64_t i = 0; i < rows; ++i)
      rstd.data<float>()[i] = static_cast<float>(1.0 / std::sqrt(squares.data<float>()[i] * inv_cols + eps));
    Tensor y = Tensor::empty(x.shape());
    const float *g = gamma.data<float>(), *b = beta.defined() ? beta.data<float>() : nullptr, *rs = rstd.data<float>();
    float* yp = y.data<float>();
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, 64), [&](const tbb::blocked_range<int64_t>& r) {
      for (int64_t i = r.begin(); i < r.end(); ++i)
        for (int64_t j = 0; j < c; ++j)
          yp[i * c + j] = (xp[i * c + j] - mu[i]) * rs[i] * g[j] + (b ? b[j] : 0.f);
    });
    ctx.saved = {x, gamma, mean, rstd};
    return y;
  };

  auto backward = [=](autograd::FunctionContext& ctx, const Tensor& grad) {
    ACC_PROFILE(norm == Norm::layer ? "split_layer_norm.backward" : "split_rms_norm.backward");
    memory::CategoryScope activations(memory::Category::activations);
    const Tensor dy = as_f32(grad);
    const float *xp = ctx.saved[0].data<float>(), *g = ctx.saved[1].data<float>(), *mu = ctx.saved[2].data<float>(),
                *rs = ctx.saved[3].data<float>(), *dyp = dy.data<float>();
    auto xhat = [&](int64_t i, int64_t j) { return (xp[i * c + j] - mu[i]) * rs[i]; };
    std::vector<Tensor> grads(ctx.needs_input_grad.size());
    if (ctx.needs_input_grad[0]) {
      // Over the whole row: sum(dxhat) (layer norm only) and sum(dxhat * xhat), dxhat = dy * gamma.
      const int width = norm == Norm::layer ? 2 : 1;
      const Tensor sums = summed_rows(rows, width, *group, [&](int64_t i, double* s) {
        for (int64_t j = 0; j < c; ++j) {
          const double dxhat = static_cast<double>(dyp[i * c + j]) * g[j];
          s[0] += dxhat * xhat(i, j);
          if (width == 2) s[1] += dxhat;
        }
      });
      Tensor dx = Tensor::empty(ctx.saved[0].shape());
      float* dxp = dx.data<float>();
      const float* sp = sums.data<float>();
      tbb::parallel_for(tbb::blocked_range<int64_t>(0, rows, 64), [&](const tbb::blocked_range<int64_t>& r) {
        for (int64_t i = r.begin(); i < r.end(); ++i) {
          const double dot = sp[i * width] * inv_cols, total = width == 2 ? sp[i * width + 1] * inv_cols : 0.0;
          for (int64_t j = 0; j < c; ++j)
            dxp[i * c + j] = static_cast<float>(rs[i] * (dyp[i * c + j] * g[j] - total - xhat(i, j) * dot));
        }
      });
      grads[0] = dx.view(grad.shape());
    }
    const bool need_gamma = ctx.needs_input_grad[1], need_beta = grads.size() > 2 && ctx.needs_input_grad[2];
    if (need_gamma || need_beta) {  // this rank's columns, summed over the rows
      std::vector<double> dg(static_cast<size_t>(c)), db(static_cast<size_t>(c));
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < c; ++j) {
          dg[static_cast<size_t>(j)] += static_cast<double>(dyp[i * c + j]) * xhat(i, j);
          db[static_cast<size_t>(j)] += dyp[i * c + j];
        }
      auto to_tensor = [c](const std::vector<double>& v) {
        Tensor t = Tensor::empty({c});
        for (int64_t j = 0; j < c; ++j) t.data<float>()[j] = static_cast<float>(v[static_cast<size_t>(j)]);
        return t;
      };
      if (need_gamma) grads[1] = to_tensor(dg);
      if (need_beta) grads[2] = to_tensor(db);
    }
    return grads;
  };
  return autograd::apply_function(op, inputs, forward, backward);
}

}  // namespace

Tensor split_layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, double eps, int64_t cols,
                        const std::shared_ptr<dist::ProcessGroup>& group) {
  return split_norm(Norm::layer, x, gamma, beta, eps, cols, group);
}

Tensor split_rms_norm(const Tensor& x, const Tensor& gamma, double eps, int64_t cols,
                      const std::shared_ptr<dist::ProcessGroup>& group) {
  return split_norm(Norm::rms, x, gamma, Tensor(), eps, cols, group);
}

}  // namespace acc::parallel
