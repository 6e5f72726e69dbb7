#pragma once
// Checks shared by the element-wise kernel tests: finite-difference gradients of a forward
// kernel and a scoped thread count for determinism tests.
#include <cstdint>
#include <functional>
#include <vector>

#include "acc/runtime/threads.h"

namespace acc::test {

// Gradient of loss(x) = sum_k w_k * fwd(x)_k by central differences (x_i +- h), loss in double.
// `fwd` writes w.size() outputs for an input of x.size() values.
inline std::vector<float> fd_grad(std::vector<float> x, const std::vector<float>& w,
                                  const std::function<void(const float*, float*)>& fwd, float h) {
  std::vector<float> y(w.size()), g(x.size());
  auto loss = [&] {
    fwd(x.data(), y.data());
    double s = 0;
    for (size_t k = 0; k < y.size(); ++k) s += static_cast<double>(w[k]) * y[k];
    return s;
  };
  for (size_t i = 0; i < x.size(); ++i) {
    const float x0 = x[i];
    const float xp = x0 + h, xm = x0 - h;  // the steps actually taken after f32 rounding
    x[i] = xp;
    const double up = loss();
    x[i] = xm;
    const double down = loss();
    x[i] = x0;
    g[i] = static_cast<float>((up - down) / (static_cast<double>(xp) - xm));
  }
  return g;
}

// Sets the kernels' thread count for one scope and restores the default afterwards.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n) { runtime::set_num_threads(n); }
  ~ScopedThreads() { runtime::set_num_threads(runtime::default_num_threads()); }
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;
};

}  // namespace acc::test
