#pragma once
// Training speed: tokens (or samples) per second over the steps since the last report, and
// model FLOPs utilisation (MFU) = achieved model FLOP/s / a GEMM peak measured on this machine.
#include <chrono>
#include <cstdint>

#include "acc/tensor/dtype.h"

namespace acc::train {

// The best GFLOP/s of acc's own matmul (kernels::matmul) on an n x n x n product of `dtype`
// inputs, timed for about `seconds`: the ceiling MFU is quoted against.
double measure_gemm_peak_gflops(DType dtype = DType::f32, int64_t n = 1024, double seconds = 0.5);

class ThroughputMeter {
 public:
  // flops_per_token: Model::train_flops_per_token(seq_len); peak_gflops 0 disables MFU.
  ThroughputMeter(double flops_per_token, double peak_gflops);

  // Counts one finished step of `tokens` (timed from construction or the last reset).
  void step(int64_t tokens);
  double tokens_per_second() const;  // since the last reset (0 before any timed step)
  double mfu() const;                // fraction of the peak, 0 when unknown
  void reset();                      // start a new window now

 private:
  double flops_per_token_, peak_gflops_;
  int64_t tokens_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace acc::train
