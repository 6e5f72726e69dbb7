// Reference convolution and pooling: direct loops in double, for tests.
#include <algorithm>
#include <vector>

#include "acc/kernels/conv.h"

namespace acc::kernels::ref {
namespace {

// Calls fn(x_index, w_index, y_index) for every in-bounds (input, weight, output) triple.
template <class Fn>
void for_each_term(const Conv2dShape& s, Fn&& fn) {
  const int64_t OH = s.out_h(), OW = s.out_w();
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t k = 0; k < s.K; ++k)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow)
          for (int64_t c = 0; c < s.C; ++c)
            for (int64_t r = 0; r < s.R; ++r)
              for (int64_t q = 0; q < s.S; ++q) {
                const int64_t h = oh * s.stride - s.pad + r, w = ow * s.stride - s.pad + q;
                if (h < 0 || h >= s.H || w < 0 || w >= s.W) continue;
                fn(((n * s.C + c) * s.H + h) * s.W + w, ((k * s.C + c) * s.R + r) * s.S + q,
                   ((n * s.K + k) * OH + oh) * OW + ow);
              }
}

void store(const std::vector<double>& v, float* out) {
  std::transform(v.begin(), v.end(), out, [](double d) { return static_cast<float>(d); });
}

}  // namespace

void conv2d_fwd(const float* x, const float* w, const float* b, float* y, const Conv2dShape& s) {
  const int64_t P = s.out_h() * s.out_w();
  std::vector<double> acc(s.N * s.K * P);
  for (int64_t i = 0; i < static_cast<int64_t>(acc.size()); ++i)
    acc[i] = b ? b[(i / P) % s.K] : 0.0;
  for_each_term(s, [&](int64_t xi, int64_t wi, int64_t yi) {
    acc[yi] += static_cast<double>(x[xi]) * w[wi];
  });
  store(acc, y);
}

void conv2d_bwd(const float* dy, const float* x, const float* w, float* dx, float* dw, float* db,
                const Conv2dShape& s) {
  const int64_t P = s.out_h() * s.out_w();
  std::vector<double> gx(s.N * s.C * s.H * s.W, 0.0), gw(s.K * s.C * s.R * s.S);
  for (size_t i = 0; i < gw.size(); ++i) gw[i] = dw[i];
  for_each_term(s, [&](int64_t xi, int64_t wi, int64_t yi) {
    gx[xi] += static_cast<double>(dy[yi]) * w[wi];
    gw[wi] += static_cast<double>(dy[yi]) * x[xi];
  });
  if (dx) store(gx, dx);
  store(gw, dw);
  if (db)
    for (int64_t k = 0; k < s.K; ++k) {
      double sum = db[k];
      for (int64_t n = 0; n < s.N; ++n)
        for (int64_t p = 0; p < P; ++p) sum += dy[(n * s.K + k) * P + p];
      db[k] = static_cast<float>(sum);
    }
}

void maxpool2d_fwd(const float* x, float* y, int32_t* argmax, const Pool2dShape& s) {
  const int64_t OH = s.out_h(), OW = s.out_w();
  for (int64_t plane = 0; plane < s.N * s.C; ++plane)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t best = -1;
        for (int64_t i = 0; i < s.kernel; ++i)
          for (int64_t j = 0; j < s.kernel; ++j) {
            const int64_t at = (oh * s.stride + i) * s.W + ow * s.stride + j;
            if (best < 0 || x[plane * s.H * s.W + at] > x[plane * s.H * s.W + best]) best = at;
          }
        const int64_t o = (plane * OH + oh) * OW + ow;
        y[o] = x[plane * s.H * s.W + best];
        argmax[o] = static_cast<int32_t>(best);
      }
}

void maxpool2d_bwd(const float* dy, const int32_t* argmax, float* dx, const Pool2dShape& s) {
  const int64_t out = s.out_h() * s.out_w(), in = s.H * s.W;
  std::fill(dx, dx + s.N * s.C * in, 0.f);
  for (int64_t plane = 0; plane < s.N * s.C; ++plane)
    for (int64_t o = 0; o < out; ++o)
      dx[plane * in + argmax[plane * out + o]] += dy[plane * out + o];
}

}  // namespace acc::kernels::ref
