// AdamW / SGD: fast vs reference over several steps and odd sizes, hand-computed updates, the
// bf16 copy equals to_bf16(param) bit for bit, and invalid hyper-parameters throw.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "acc/kernels/convert.h"
#include "acc/kernels/optimizer.h"
#include "acc/util/error.h"
#include "support/test_support.h"

namespace acc::kernels {
namespace {

using test::all_close;
using test::random_vector;
using Vec = std::vector<float>;

const int64_t kSizes[] = {1, 7, 33, 768, 1000, 4097, 100003};

void expect_bf16_copy(const Vec& param, const std::vector<bfloat16>& copy) {
  for (size_t i = 0; i < param.size(); ++i)
    ASSERT_EQ(copy[i].bits, to_bf16(param[i]).bits) << "index " << i << " of " << param.size();
}

// Both implementations follow the same f32 formula; they differ only by fma contraction and the
// reference's double denominator, i.e. a few ulp per step on params ~1.
constexpr float kRtol = 1e-6f, kAtol = 1e-6f;

TEST(AdamW, FastMatchesReferenceOverSteps) {
  for (const int64_t n : kSizes) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    Vec p = random_vector(n, 1), m(n, 0.f), v(n, 0.f);
    Vec p_ref = p, m_ref = m, v_ref = v;
    std::vector<bfloat16> copy(n);
    AdamWParams h;
    h.lr = 1e-2f, h.weight_decay = 0.1f;
    for (int64_t step = 1; step <= 3; ++step) {
      h.step = step;
      const Vec g = random_vector(n, 100 + static_cast<uint64_t>(step));
      adamw_step(p.data(), g.data(), m.data(), v.data(), n, h, copy.data());
      ref::adamw_step(p_ref.data(), g.data(), m_ref.data(), v_ref.data(), n, h);
    }
    EXPECT_TRUE(all_close(p, p_ref, kRtol, kAtol));
    EXPECT_TRUE(all_close(m, m_ref, kRtol, kAtol));
    EXPECT_TRUE(all_close(v, v_ref, kRtol, kAtol));
    expect_bf16_copy(p, copy);
  }
}

TEST(AdamW, FirstStepByHand) {
  // Step 1 from m = v = 0: mhat = g, vhat = g^2, so p1 = p0 (1 - lr wd) - lr g / (|g| + eps).
  AdamWParams h;
  h.lr = 0.1f, h.weight_decay = 0.5f, h.eps = 1e-3f;
  Vec p = {2.f, -1.f, 0.5f}, m(3, 0.f), v(3, 0.f);
  const Vec g = {0.5f, -2.f, 0.f};
  const Vec p0 = p;
  adamw_step(p.data(), g.data(), m.data(), v.data(), 3, h);
  for (size_t i = 0; i < 3; ++i) {
    const double want = p0[i] * (1.0 - 0.05) - 0.1 * g[i] / (std::fabs(g[i]) + 1e-3);
    EXPECT_NEAR(p[i], want, 1e-6) << i;
    // (1 - beta) taken in f32 as the kernels do: 1 - 0.999f is 1.0000467e-3, not 1e-3.
    EXPECT_NEAR(m[i], static_cast<double>(1.f - h.beta1) * g[i], 1e-7) << i;
    EXPECT_NEAR(v[i], static_cast<double>(1.f - h.beta2) * g[i] * g[i], 1e-9) << i;
  }
}

TEST(AdamW, RejectsBadHyperParameters) {
  float x = 0.f;
  AdamWParams h;
  h.step = 0;
  EXPECT_THROW(adamw_step(&x, &x, &x, &x, 1, h), Error);
  h.step = 1, h.beta2 = 1.f;
  EXPECT_THROW(adamw_step(&x, &x, &x, &x, 1, h), Error);
}

struct SgdCase {
  float momentum, dampening, weight_decay;
  bool nesterov;
};

TEST(SGD, FastMatchesReferenceOverSteps) {
  const SgdCase cases[] = {{0.f, 0.f, 0.f, false}, {0.f, 0.f, 0.01f, false}, {0.9f, 0.f, 0.f, false},
                           {0.9f, 0.1f, 0.01f, false}, {0.9f, 0.f, 0.01f, true}};
  for (const SgdCase& c : cases)
    for (const int64_t n : kSizes) {
      SCOPED_TRACE(::testing::Message() << "n=" << n << " momentum=" << c.momentum << " dampening="
                                        << c.dampening << " wd=" << c.weight_decay << " nesterov=" << c.nesterov);
      Vec p = random_vector(n, 2), buf(n, 123.f);  // first_step must ignore the stale buffer
      Vec p_ref = p, buf_ref = buf;
      std::vector<bfloat16> copy(n);
      SGDParams h;
      h.lr = 0.05f, h.momentum = c.momentum, h.dampening = c.dampening, h.weight_decay = c.weight_decay;
      h.nesterov = c.nesterov;
      for (int step = 0; step < 3; ++step) {
        h.first_step = step == 0;
        const Vec g = random_vector(n, 200 + static_cast<uint64_t>(step));
        sgd_step(p.data(), g.data(), buf.data(), n, h, copy.data());
        ref::sgd_step(p_ref.data(), g.data(), buf_ref.data(), n, h);
      }
      EXPECT_TRUE(all_close(p, p_ref, kRtol, kAtol));
      if (c.momentum != 0.f) EXPECT_TRUE(all_close(buf, buf_ref, kRtol, kAtol));
      else EXPECT_EQ(buf, buf_ref);  // untouched without momentum
      expect_bf16_copy(p, copy);
    }
}

TEST(SGD, NesterovByHand) {
  // PyTorch: d = g + wd p; buf = d (first step) then mu buf + (1 - damp) d; nesterov uses d + mu buf.
  SGDParams h;
  h.lr = 0.1f, h.momentum = 0.5f, h.weight_decay = 0.1f, h.nesterov = true, h.first_step = true;
  float p = 1.f, buf = 0.f;
  const float g1 = 2.f, g2 = -1.f;
  sgd_step(&p, &g1, &buf, 1, h);
  // d = 2.1, buf = 2.1, step = 2.1 + 1.05 = 3.15, p = 1 - 0.315 = 0.685
  EXPECT_NEAR(buf, 2.1f, 1e-6f);
  EXPECT_NEAR(p, 0.685f, 1e-6f);
  h.first_step = false;
  sgd_step(&p, &g2, &buf, 1, h);
  // d = -1 + 0.0685 = -0.9315, buf = 1.05 - 0.9315 = 0.1185, step = -0.9315 + 0.05925 = -0.87225
  EXPECT_NEAR(buf, 0.1185f, 1e-6f);
  EXPECT_NEAR(p, 0.685f + 0.087225f, 1e-6f);
}

TEST(SGD, RejectsInconsistentSettings) {
  float x = 0.f;
  SGDParams h;
  h.momentum = 0.9f;
  EXPECT_THROW(sgd_step(&x, &x, nullptr, 1, h), Error);  // momentum without a buffer
  h.nesterov = true, h.dampening = 0.1f;
  EXPECT_THROW(sgd_step(&x, &x, &x, 1, h), Error);  // PyTorch forbids nesterov with dampening
  h.momentum = 0.f, h.dampening = 0.f;
  EXPECT_THROW(sgd_step(&x, &x, &x, 1, h), Error);  // nesterov without momentum
}

}  // namespace
}  // namespace acc::kernels
