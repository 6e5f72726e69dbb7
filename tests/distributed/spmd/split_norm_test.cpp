// The norms over a hidden dim split across the ranks (strategies/spmd/split_norm.h) against the
// plain ops on the whole rows: forward, and the gradients of x, gamma and beta, with 13 columns
// split unevenly (7/6 at 2 ranks, 4/3/3/3 at 4) and bf16 inputs. The plain ops' backward is
// checked with finite differences in tests/autograd.
#include <gtest/gtest.h>

#include "acc/autograd/grad_mode.h"
#include "acc/ops/ops.h"
#include "acc/runtime/init.h"
#include "common/model_axis_ops.h"
#include "common/split_norm.h"
#include "support/test_support.h"

namespace acc::test {
namespace {

constexpr int64_t kRows = 6, kCols = 13;

struct Result {
  std::vector<float> y, dx, dgamma, dbeta;  // whole: the split run's slices gathered
};

Tensor leaf(const Shape& shape, const char* name, DType dtype = DType::f32) {
  Tensor t = Tensor::randn(shape, 7, name);
  if (dtype != DType::f32) t = ops::cast(t, dtype).detach();
  t.set_requires_grad(true);
  return t;
}

// L = sum(norm(x) * w) over every rank's columns, with x, gamma, beta and w the same on every rank.
Result run(bool layer, bool split, DType dtype) {
  const auto group = acc::world_ptr();
  const Tensor x = leaf({2, kRows / 2, kCols}, "x", dtype), gamma = leaf({kCols}, "gamma"), beta = leaf({kCols}, "beta");
  const Tensor w = Tensor::randn({2, kRows / 2, kCols}, 8, "w");
  const auto extents = parallel::split_sizes(kCols, group->size());
  Tensor y;
  if (split) {
    auto mine = [&](const Tensor& t) { return parallel::scatter_slices(t, -1, extents, group); };
    const Tensor local = layer ? parallel::split_layer_norm(mine(x), mine(gamma), mine(beta), 1e-5, kCols, group)
                               : parallel::split_rms_norm(mine(x), mine(gamma), 1e-6, kCols, group);
    ops::sum(ops::mul(local, mine(w))).backward();  // each rank's part of L: the sum is over the ranks
    autograd::NoGradGuard no_grad;
    y = parallel::gather_slices(local, -1, extents, group);
  } else {
    y = layer ? ops::layer_norm(x, gamma, beta, 1e-5) : ops::rms_norm(x, gamma, 1e-6);
    ops::sum(ops::mul(y, w)).backward();
  }
  return {y.to_vector(), x.grad().to_vector(), gamma.grad().to_vector(),
          layer ? beta.grad().to_vector() : std::vector<float>()};
}

class SplitNorm : public ::testing::TestWithParam<std::tuple<bool, DType>> {};

TEST_P(SplitNorm, MatchesTheNormOfTheWholeRows) {
  const auto [layer, dtype] = GetParam();
  const Result split = run(layer, true, dtype), whole = run(layer, false, dtype);
  EXPECT_TRUE(all_close(split.y, whole.y, 1e-5f, 1e-5f)) << "forward";
  EXPECT_TRUE(all_close(split.dx, whole.dx, 1e-4f, 1e-5f)) << "x's gradient";
  EXPECT_TRUE(all_close(split.dgamma, whole.dgamma, 1e-5f, 1e-5f)) << "gamma's gradient";
  if (layer) {
    EXPECT_TRUE(all_close(split.dbeta, whole.dbeta, 1e-5f, 1e-5f)) << "beta's gradient";
  }
}

INSTANTIATE_TEST_SUITE_P(Norms, SplitNorm,
                         ::testing::Combine(::testing::Bool(), ::testing::Values(DType::f32, DType::bf16)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "layer_norm" : "rms_norm") +
                                  (std::get<1>(info.param) == DType::bf16 ? "_bf16" : "_f32");
                         });

TEST(SplitNorm, ColumnsMustFitTheRow) {
  const Tensor x = Tensor::randn({2, 4}, 1, "x"), gamma = Tensor::full({4}, 1.0);
  EXPECT_NE(error_of([&] { parallel::split_rms_norm(x, gamma, 1e-6, 3, acc::world_ptr()); }).find("fewer than"),
            std::string::npos);
}

}  // namespace
}  // namespace acc::test
