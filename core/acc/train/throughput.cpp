#include "acc/train/throughput.h"

#include "acc/kernels/matmul.h"
#include "acc/tensor/tensor.h"

namespace acc::train {

double measure_gemm_peak_gflops(DType dtype, int64_t n, double seconds) {
  Tensor a = Tensor::rand_uniform({n, n}, 1, "gemm_peak.a", -1.f, 1.f, dtype);
  Tensor b = Tensor::rand_uniform({n, n}, 1, "gemm_peak.b", -1.f, 1.f, dtype);
  Tensor c = Tensor::empty({n, n});
  // B stored [N, K]: the layout oneDNN runs fastest (kernels/matmul.cpp copies others into it).
  const kernels::MatmulShape s{.M = n, .N = n, .K = n, .trans_b = true, .ab_type = dtype};
  kernels::matmul(a.raw_data(), b.raw_data(), c.raw_data(), s);  // warm-up: primitive, pages
  // The rate sustained over the window, not the best call: ranks sharing cores each find calls
  // with a core to themselves, and the sum of such best calls overstated a 2-core machine 1.6x
  // with 4 ranks.
  const auto t0 = std::chrono::steady_clock::now();
  const auto stop = t0 + std::chrono::duration<double>(seconds);
  int64_t calls = 0;
  do {
    kernels::matmul(a.raw_data(), b.raw_data(), c.raw_data(), s);
    ++calls;
  } while (std::chrono::steady_clock::now() < stop);
  const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return 2.0 * static_cast<double>(n * n * n) * static_cast<double>(calls) / dt / 1e9;
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
