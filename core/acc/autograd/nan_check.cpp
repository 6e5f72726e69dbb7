#include "acc/autograd/nan_check.h"

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "acc/kernels/convert.h"

namespace acc::autograd {
namespace {

std::atomic<bool>& flag() {
  static std::atomic<bool> on = [] {
    const char* env = std::getenv("ACC_CHECK_NAN");
    return env && *env && std::strcmp(env, "0") != 0;
  }();
  return on;
}

template <class T, class ToFloat>
int64_t first_non_finite(const T* data, int64_t n, ToFloat to_float) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(to_float(data[i]))) return i;
  return -1;
}

}  // namespace

bool nan_checks_enabled() { return flag().load(std::memory_order_relaxed); }
void set_nan_checks(bool on) { flag().store(on, std::memory_order_relaxed); }

void check_finite(const Tensor& t, std::string_view op, std::string_view what) {
  if (!t.defined()) return;
  int64_t at = -1;
  if (t.dtype() == DType::f32)
    at = first_non_finite(t.data<float>(), t.numel(), [](float v) { return v; });
  else if (t.dtype() == DType::bf16)
    at = first_non_finite(t.data<bfloat16>(), t.numel(), kernels::to_f32);
  if (at < 0) return;
  const float value = t.dtype() == DType::f32 ? t.data<float>()[at] : kernels::to_f32(t.data<bfloat16>()[at]);
  ACC_FAIL("ACC_CHECK_NAN: op '", op, "' produced ", std::isnan(value) ? "NaN" : "infinity", " in its ",
           what, " ", t.describe(), " at element ", at);
}

}  // namespace acc::autograd
