#include "acc/kernels/conv.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "acc/kernels/matmul.h"
#include "acc/util/error.h"

namespace acc::kernels {
namespace {

// Upper bound on the im2col buffer (floats): images are processed in groups this large so that
// small images still make one sizeable GEMM while big batches do not need N copies of the input.
constexpr int64_t kMaxColumnElems = int64_t{1} << 22;

void check_conv(const char* op, const Conv2dShape& s) {
  ACC_CHECK(
      s.N >= 0 && s.C >= 1 && s.H >= 1 && s.W >= 1 && s.K >= 1 && s.R >= 1 && s.S >= 1 &&
          s.stride >= 1 && s.pad >= 0 && s.H + 2 * s.pad >= s.R && s.W + 2 * s.pad >= s.S,
      op, ": invalid shape N=", s.N, " C=", s.C, " H=", s.H, " W=", s.W, " K=", s.K, " R=", s.R,
      " S=", s.S, " stride=", s.stride, " pad=", s.pad,
      "; expected positive sizes, stride >= 1, pad >= 0 and the kernel to fit the padded input");
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Column layout of a group of G images: rows (c, r, s), columns (image g, oh, ow).
struct Columns {
  const Conv2dShape& s;
  int64_t OH = s.out_h(), OW = s.out_w(), pixels = OH * OW;
  int64_t rows = s.C * s.R * s.S;
  int64_t group = std::clamp<int64_t>(kMaxColumnElems / std::max<int64_t>(1, rows* pixels), 1,
                                      std::max<int64_t>(1, s.N));

  // Calls fn(col_index, input_index) for every in-bounds tap of channel c of image g (input
  // index within that image's channel plane); padding taps are skipped.
  template <class Fn>
  void for_each_tap(int64_t g, int64_t c, int64_t images, Fn&& fn) const {
    for (int64_t r = 0; r < s.R; ++r)
      for (int64_t q = 0; q < s.S; ++q) {
        const int64_t row = (c * s.R + r) * s.S + q;
        // Output columns whose tap lands inside the input row: w = ow*stride - pad + q in [0, W).
        const int64_t ow_begin = std::min(OW, ceil_div(std::max<int64_t>(0, s.pad - q), s.stride));
        const int64_t ow_end =
            std::min(OW, ceil_div(std::max<int64_t>(0, s.W + s.pad - q), s.stride));
        for (int64_t oh = 0; oh < OH; ++oh) {
          const int64_t h = oh * s.stride - s.pad + r;
          if (h < 0 || h >= s.H) continue;
          const int64_t col = row * images * pixels + g * pixels + oh * OW;
          const int64_t in = h * s.W - s.pad + q;
          for (int64_t ow = ow_begin; ow < ow_end; ++ow) fn(col + ow, in + ow * s.stride);
        }
      }
  }

  // cols[rows, images*pixels] from x images [n0, n0+images).
  void im2col(const float* x, int64_t n0, int64_t images, float* cols) const {
    std::fill(cols, cols + rows * images * pixels, 0.f);
    tbb::parallel_for(int64_t{0}, images * s.C, [&](int64_t gc) {
      const int64_t g = gc / s.C, c = gc % s.C;
      const float* plane = x + ((n0 + g) * s.C + c) * s.H * s.W;
      for_each_tap(g, c, images, [&](int64_t col, int64_t in) { cols[col] = plane[in]; });
    });
  }

  // dx images [n0, n0+images) += scatter of cols; each task owns one (image, channel) plane.
  void col2im(const float* cols, int64_t n0, int64_t images, float* dx) const {
    tbb::parallel_for(int64_t{0}, images * s.C, [&](int64_t gc) {
      const int64_t g = gc / s.C, c = gc % s.C;
      float* plane = dx + ((n0 + g) * s.C + c) * s.H * s.W;
      for_each_tap(g, c, images, [&](int64_t col, int64_t in) { plane[in] += cols[col]; });
    });
  }
};

}  // namespace

void conv2d_fwd(const float* x, const float* w, const float* b, float* y, const Conv2dShape& s) {
  check_conv("conv2d_fwd", s);
  const Columns cols_of{s};
  const int64_t P = cols_of.pixels;
  std::vector<float> cols, out;
  for (int64_t n0 = 0; n0 < s.N; n0 += cols_of.group) {
    const int64_t images = std::min(cols_of.group, s.N - n0);
    cols.resize(cols_of.rows * images * P);
    out.resize(s.K * images * P);
    cols_of.im2col(x, n0, images, cols.data());
    // out[K, images*P] = w[K, CRS] * cols[CRS, images*P]
    matmul(w, cols.data(), out.data(), MatmulShape{s.K, images * P, cols_of.rows});
    for (int64_t g = 0; g < images; ++g)
      for (int64_t k = 0; k < s.K; ++k) {
        const float* src = out.data() + (k * images + g) * P;
        float* dst = y + ((n0 + g) * s.K + k) * P;
        const float bias = b ? b[k] : 0.f;
        for (int64_t p = 0; p < P; ++p) dst[p] = src[p] + bias;
      }
  }
}

void conv2d_bwd(const float* dy, const float* x, const float* w, float* dx, float* dw, float* db,
                const Conv2dShape& s) {
  check_conv("conv2d_bwd", s);
  const Columns cols_of{s};
  const int64_t P = cols_of.pixels;
  if (dx) std::fill(dx, dx + s.N * s.C * s.H * s.W, 0.f);
  std::vector<float> cols, dy_group, dcols;
  for (int64_t n0 = 0; n0 < s.N; n0 += cols_of.group) {
    const int64_t images = std::min(cols_of.group, s.N - n0);
    // dy of the group regrouped as [K, images*P], the layout the forward GEMM produced.
    dy_group.resize(s.K * images * P);
    for (int64_t g = 0; g < images; ++g)
      for (int64_t k = 0; k < s.K; ++k)
        std::copy_n(dy + ((n0 + g) * s.K + k) * P, P, dy_group.data() + (k * images + g) * P);
    if (db)
      for (int64_t k = 0; k < s.K; ++k) {
        const float* row = dy_group.data() + k * images * P;
        db[k] += static_cast<float>(std::accumulate(row, row + images * P, 0.0));
      }
    // dw[K, CRS] += dy[K, images*P] * cols^T
    cols.resize(cols_of.rows * images * P);
    cols_of.im2col(x, n0, images, cols.data());
    MatmulShape dw_shape{s.K, cols_of.rows, images * P, false, true};
    dw_shape.accumulate = true;
    matmul(dy_group.data(), cols.data(), dw, dw_shape);
    if (!dx) continue;
    // dcols[CRS, images*P] = w^T * dy, scattered back onto the input grid.
    dcols.resize(cols_of.rows * images * P);
    matmul(w, dy_group.data(), dcols.data(),
           MatmulShape{cols_of.rows, images * P, s.K, true, false});
    cols_of.col2im(dcols.data(), n0, images, dx);
  }
}

namespace {
void check_pool(const char* op, const Pool2dShape& s) {
  ACC_CHECK(
      s.N >= 0 && s.C >= 1 && s.kernel >= 1 && s.stride >= 1 && s.H >= s.kernel && s.W >= s.kernel,
      op, ": invalid shape N=", s.N, " C=", s.C, " H=", s.H, " W=", s.W, " kernel=", s.kernel,
      " stride=", s.stride, "; expected kernel, stride >= 1 and H, W >= kernel");
}
}  // namespace

void maxpool2d_fwd(const float* x, float* y, int32_t* argmax, const Pool2dShape& s) {
  check_pool("maxpool2d_fwd", s);
  const int64_t OH = s.out_h(), OW = s.out_w();
  tbb::parallel_for(int64_t{0}, s.N * s.C, [&](int64_t plane) {
    const float* in = x + plane * s.H * s.W;
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        int64_t best = oh * s.stride * s.W + ow * s.stride;
        for (int64_t i = 0; i < s.kernel; ++i)
          for (int64_t j = 0; j < s.kernel; ++j) {
            const int64_t at = (oh * s.stride + i) * s.W + ow * s.stride + j;
            if (in[at] > in[best]) best = at;  // first maximum wins ties
          }
        const int64_t o = plane * OH * OW + oh * OW + ow;
        y[o] = in[best];
        argmax[o] = static_cast<int32_t>(best);
      }
  });
}

void maxpool2d_bwd(const float* dy, const int32_t* argmax, float* dx, const Pool2dShape& s) {
  check_pool("maxpool2d_bwd", s);
  const int64_t out = s.out_h() * s.out_w(), in = s.H * s.W;
  // One plane per task: overlapping windows (stride < kernel) add into the same input serially.
  tbb::parallel_for(int64_t{0}, s.N * s.C, [&](int64_t plane) {
    float* d = dx + plane * in;
    std::fill(d, d + in, 0.f);
    for (int64_t o = 0; o < out; ++o) d[argmax[plane * out + o]] += dy[plane * out + o];
  });
}

}  // namespace acc::kernels
