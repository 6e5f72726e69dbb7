#pragma once
// Training speed: tokens (or samples) per second over the steps timed since the last reset, and
// model FLOPs utilisation (MFU) = achieved model FLOP/s / a GEMM peak measured on this machine.
// Only the time between begin_step() and step() counts: evaluation and checkpoint saves between
// steps do not lower the figure.
#include <chrono>
#include <cstdint>

#include "acc/tensor/dtype.h"

namespace acc::train {

// The GFLOP/s acc's own matmul (kernels::matmul) sustains on n x n x n products of `dtype`
// inputs over about `seconds`: the ceiling MFU is quoted against.
double measure_gemm_peak_gflops(DType dtype = DType::f32, int64_t n = 1024, double seconds = 0.5);

class ThroughputMeter {
 public:
  // flops_per_token: Model::train_flops_per_token(seq_len); peak_gflops 0 disables MFU.
  ThroughputMeter(double flops_per_token, double peak_gflops);

  void begin_step();            // a step starts now
  void step(int64_t tokens);     // the step begun last has finished, with `tokens`
  double tokens_per_second() const;  // over the steps timed since the last reset (0: none)
  double mfu() const;                // fraction of the peak, 0 when unknown
  int64_t steps() const { return steps_; }  // timed since the last reset
  void reset();                      // forget the steps timed so far

 private:
  double flops_per_token_, peak_gflops_;
  int64_t tokens_ = 0, steps_ = 0;
  double seconds_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace acc::train
