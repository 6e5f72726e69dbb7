#include "acc/ops/reduce.h"

#include <tbb/parallel_reduce.h>

#include "acc/autograd/function.h"
#include "acc/ops/detail.h"

namespace acc::ops {

namespace {

double total(const Tensor& x) {
  const float* p = x.data<float>();
  return tbb::parallel_reduce(
      tbb::blocked_range<int64_t>(0, x.numel(), detail::kGrain), 0.0,
      [&](const tbb::blocked_range<int64_t>& r, double acc) {
        for (int64_t i = r.begin(); i < r.end(); ++i) acc += p[i];
        return acc;
      },
      [](double a, double b) { return a + b; });
}

// sum(x) * factor, with gradient factor everywhere.
Tensor scaled_total(const Tensor& x_in, double factor, const char* op) {
  Tensor x = detail::as_f32(x_in, op);
  Tensor out = detail::new_output({});
  *out.data<float>() = static_cast<float>(total(x) * factor);
  autograd::record(op, out, {x_in}, [factor, shape = x_in.shape()](const Tensor& g) {
    Tensor dx = detail::new_output(shape);
    dx.fill_(static_cast<double>(g.item()) * factor);
    return std::vector<Tensor>{dx};
  });
  return out;
}

// Row sums over the last dimension times factor; gradient broadcasts g * factor along rows.
Tensor scaled_row_sums(const Tensor& x_in, double factor, const char* op) {
  Tensor x = detail::as_f32(x_in, op);
  ACC_CHECK(x.dim() >= 1, op, ": needs at least one dimension, got ", x.describe());
  const int64_t cols = x.size(-1);
  const int64_t rows = cols ? x.numel() / cols : 0;
  Shape out_shape(x.shape().begin(), x.shape().end() - 1);
  Tensor out = detail::new_output(out_shape);
  const float* px = x.data<float>();
  float* po = out.data<float>();
  const int64_t grain = std::max<int64_t>(1, detail::kGrain / std::max<int64_t>(1, cols));
  detail::parallel_range(rows, grain, [&](int64_t s, int64_t e) {
    for (int64_t r = s; r < e; ++r) {
      double acc = 0;
      for (int64_t c = 0; c < cols; ++c) acc += px[r * cols + c];
      po[r] = static_cast<float>(acc * factor);
    }
  });
  autograd::record(op, out, {x_in}, [=, shape = x_in.shape()](const Tensor& g) {
    Tensor dx = detail::new_output(shape);
    const float* pg = g.data<float>();
    float* pd = dx.data<float>();
    detail::parallel_range(rows, grain, [&](int64_t s, int64_t e) {
      for (int64_t r = s; r < e; ++r) {
        const float v = static_cast<float>(pg[r] * factor);
        for (int64_t c = 0; c < cols; ++c) pd[r * cols + c] = v;
      }
    });
    return std::vector<Tensor>{dx};
  });
  return out;
}

}  // namespace

Tensor sum(const Tensor& x) {
  detail::check_defined(x, "sum", "input");
  return scaled_total(x, 1.0, "sum");
}

Tensor mean(const Tensor& x) {
  detail::check_defined(x, "mean", "input");
  ACC_CHECK(x.numel() > 0, "mean: ", x.describe(), " has no elements");
  return scaled_total(x, 1.0 / static_cast<double>(x.numel()), "mean");
}

Tensor sum_last(const Tensor& x) {
  detail::check_defined(x, "sum_last", "input");
  return scaled_row_sums(x, 1.0, "sum_last");
}

Tensor mean_last(const Tensor& x) {
  detail::check_defined(x, "mean_last", "input");
  ACC_CHECK(x.dim() >= 1 && x.size(-1) > 0, "mean_last: needs a non-empty last dimension, got ",
            x.describe());
  return scaled_row_sums(x, 1.0 / static_cast<double>(x.size(-1)), "mean_last");
}

}  // namespace acc::ops
