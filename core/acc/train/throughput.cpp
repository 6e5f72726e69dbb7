#include "acc/train/throughput.h"

#include <algorithm>

#include "acc/kernels/matmul.h"
#include "acc/tensor/tensor.h"

namespace acc::train {

double measure_gemm_peak_gflops(DType dtype, int64_t n, double seconds) {
  Tensor a = Tensor::rand_uniform({n, n}, 1, "gemm_peak.a", -1.f, 1.f, dtype);
  Tensor b = Tensor::rand_uniform({n, n}, 1, "gemm_peak.b", -1.f, 1.f, dtype);
  Tensor c = Tensor::empty({n, n});
  const kernels::MatmulShape s{.M = n, .N = n, .K = n, .ab_type = dtype};
  kernels::matmul(a.raw_data(), b.raw_data(), c.raw_data(), s);  // warm-up: primitive, pages
  double best = 0;
  const auto stop = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  do {
    const auto t0 = std::chrono::steady_clock::now();
    kernels::matmul(a.raw_data(), b.raw_data(), c.raw_data(), s);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * static_cast<double>(n * n * n) / dt / 1e9);
  } while (std::chrono::steady_clock::now() < stop);
  return best;
}

ThroughputMeter::ThroughputMeter(double flops_per_token, double peak_gflops)
    : flops_per_token_(flops_per_token), peak_gflops_(peak_gflops), start_(std::chrono::steady_clock::now()) {}

void ThroughputMeter::begin_step() { start_ = std::chrono::steady_clock::now(); }

void ThroughputMeter::step(int64_t tokens) {
  tokens_ += tokens;
  ++steps_;
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

double ThroughputMeter::tokens_per_second() const {
  return seconds_ > 0 ? static_cast<double>(tokens_) / seconds_ : 0.0;
}

double ThroughputMeter::mfu() const {
  return peak_gflops_ > 0 ? tokens_per_second() * flops_per_token_ / (peak_gflops_ * 1e9) : 0.0;
}

void ThroughputMeter::reset() {
  tokens_ = steps_ = 0;
  seconds_ = 0;
}

}  // namespace acc::train
