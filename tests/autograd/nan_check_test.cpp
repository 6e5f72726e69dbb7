#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "acc/autograd/nan_check.h"
#include "acc/ops/ops.h"

namespace acc {
namespace {

struct NanChecksOn {
  NanChecksOn() { autograd::set_nan_checks(true); }
  ~NanChecksOn() { autograd::set_nan_checks(false); }
};

TEST(NanCheck, ForwardOutputNamesTheOpAndElement) {
  NanChecksOn on;
  Tensor x = Tensor::from_vector({1.f, 0.f, 2.f}, {3});
  Tensor zero = Tensor::from_vector({1.f, 0.f, 1.f}, {3});
  try {
    ops::div(x, zero);  // 0/0 at element 1
    FAIL() << "expected acc::Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'div'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("NaN"), std::string::npos) << msg;
    EXPECT_NE(msg.find("element 1"), std::string::npos) << msg;
  }
}

TEST(NanCheck, BackwardGradientIsChecked) {
  NanChecksOn on;
  Tensor x = Tensor::from_vector({1.f, 2.f}, {2}).set_requires_grad();
  Tensor y = ops::sum(ops::mul(x, x));
  Tensor seed = Tensor::from_vector({INFINITY}, y.shape());
  try {
    y.backward(seed);
    FAIL() << "expected acc::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("infinity"), std::string::npos) << e.what();
  }
}

TEST(NanCheck, OffByDefaultLetsNaNThrough) {
  ASSERT_FALSE(autograd::nan_checks_enabled());
  Tensor r = ops::div(Tensor::from_vector({0.f}, {1}), Tensor::from_vector({0.f}, {1}));
  EXPECT_TRUE(std::isnan(r.item()));
}

}  // namespace
}  // namespace acc
