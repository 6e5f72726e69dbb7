#include "acc/ops/elementwise.h"

#include <algorithm>

#include "acc/autograd/function.h"
#include "acc/ops/detail.h"
#include "acc/util/profiler.h"

namespace acc::ops {

namespace {

using detail::as_f32;
using detail::new_output;

// a viewed as [rows, inner] and b as [inner].
struct Broadcast {
  int64_t rows = 1, inner = 1;
};

Broadcast broadcast_of(const char* op, const Tensor& a, const Tensor& b) {
  detail::check_defined(a, op, "a");
  detail::check_defined(b, op, "b");
  const Shape& as = a.shape();
  const Shape& bs = b.shape();
  const bool suffix = bs.size() <= as.size() && std::equal(bs.rbegin(), bs.rend(), as.rbegin());
  ACC_CHECK(suffix, op, ": cannot broadcast b ", shape_str(bs), " onto a ", shape_str(as),
            "; b's shape must equal a's or be a suffix of it");
  const int64_t inner = b.numel();
  return {inner == 0 ? 0 : a.numel() / inner, inner};
}

// out[r, j] = f(a[r, j], b[j]) with out shaped like a.
template <class F>
Tensor map2(const Tensor& a, const Tensor& b, Broadcast bc, F f) {
  Tensor out = new_output(a.shape());
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  const int64_t inner = bc.inner;
  detail::parallel_range(bc.rows * inner, detail::kGrain, [&](int64_t s, int64_t e) {
    while (s < e) {  // one row segment at a time, so the inner loop vectorises
      const int64_t j = s % inner;
      const int64_t len = std::min(e - s, inner - j);
      for (int64_t k = 0; k < len; ++k) po[s + k] = f(pa[s + k], pb[j + k]);
      s += len;
    }
  });
  return out;
}

template <class F>
Tensor map1(const Tensor& a, F f) {
  Tensor out = new_output(a.shape());
  const float* pa = a.data<float>();
  float* po = out.data<float>();
  detail::parallel_range(a.numel(), detail::kGrain, [&](int64_t s, int64_t e) {
    for (int64_t i = s; i < e; ++i) po[i] = f(pa[i]);
  });
  return out;
}

// Sums g [rows, inner] over rows into b's shape (the gradient of a broadcast operand).
Tensor reduce_rows(const Tensor& g, Broadcast bc, const Shape& b_shape) {
  if (bc.rows == 1) return g.view(b_shape);
  return detail::sum_leading(g, bc.rows, bc.inner).view(b_shape);
}

Broadcast same_shape(const Tensor& t) { return {1, t.numel()}; }

}  // namespace

Tensor add(const Tensor& a_in, const Tensor& b_in) {
  ACC_PROFILE("add");
  const Broadcast bc = broadcast_of("add", a_in, b_in);
  Tensor out = map2(as_f32(a_in, "add"), as_f32(b_in, "add"), bc,
                    [](float x, float y) { return x + y; });
  autograd::record("add", out, {a_in, b_in}, [bc, b_shape = b_in.shape()](const Tensor& g) {
    ACC_PROFILE("add.backward");
    return std::vector<Tensor>{g, reduce_rows(g, bc, b_shape)};
  });
  return out;
}

Tensor sub(const Tensor& a_in, const Tensor& b_in) {
  const Broadcast bc = broadcast_of("sub", a_in, b_in);
  Tensor out = map2(as_f32(a_in, "sub"), as_f32(b_in, "sub"), bc,
                    [](float x, float y) { return x - y; });
  autograd::record("sub", out, {a_in, b_in}, [bc, b_shape = b_in.shape()](const Tensor& g) {
    return std::vector<Tensor>{g, map1(reduce_rows(g, bc, b_shape), [](float x) { return -x; })};
  });
  return out;
}

Tensor mul(const Tensor& a_in, const Tensor& b_in) {
  ACC_PROFILE("mul");
  const Broadcast bc = broadcast_of("mul", a_in, b_in);
  Tensor a = as_f32(a_in, "mul").detach(), b = as_f32(b_in, "mul").detach();
  Tensor out = map2(a, b, bc, [](float x, float y) { return x * y; });
  const bool need_a = a_in.requires_grad(), need_b = b_in.requires_grad();
  autograd::record("mul", out, {a_in, b_in}, [=](const Tensor& g) {
    ACC_PROFILE("mul.backward");
    auto times = [](float x, float y) { return x * y; };
    Tensor da = need_a ? map2(g, b, bc, times) : Tensor();
    Tensor db = need_b ? reduce_rows(map2(g, a, same_shape(g), times), bc, b.shape()) : Tensor();
    return std::vector<Tensor>{da, db};
  });
  return out;
}

Tensor div(const Tensor& a_in, const Tensor& b_in) {
  const Broadcast bc = broadcast_of("div", a_in, b_in);
  Tensor a = as_f32(a_in, "div").detach(), b = as_f32(b_in, "div").detach();
  Tensor out = map2(a, b, bc, [](float x, float y) { return x / y; });
  const bool need_a = a_in.requires_grad(), need_b = b_in.requires_grad();
  autograd::record("div", out, {a_in, b_in}, [=](const Tensor& g) {
    Tensor da = need_a ? map2(g, b, bc, [](float x, float y) { return x / y; }) : Tensor();
    Tensor db;
    if (need_b) {
      // d(a/b)/db = -a/b^2: form g*a per element, then divide by b^2 with b broadcast.
      Tensor ga = map2(g, a, same_shape(g), [](float x, float y) { return x * y; });
      Tensor t = map2(ga, b, bc, [](float x, float y) { return -x / (y * y); });
      db = reduce_rows(t, bc, b.shape());
    }
    return std::vector<Tensor>{da, db};
  });
  return out;
}

Tensor add(const Tensor& a_in, double s) {
  const float sf = static_cast<float>(s);
  Tensor out = map1(as_f32(a_in, "add"), [sf](float x) { return x + sf; });
  autograd::record("add_scalar", out, {a_in}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
  return out;
}

Tensor sub(const Tensor& a, double s) { return add(a, -s); }

Tensor scale(const Tensor& a_in, double s) {
  const float sf = static_cast<float>(s);
  auto times = [sf](float x) { return x * sf; };
  Tensor out = map1(as_f32(a_in, "scale"), times);
  autograd::record("scale", out, {a_in},
                   [times](const Tensor& g) { return std::vector<Tensor>{map1(g, times)}; });
  return out;
}

Tensor mul(const Tensor& a, double s) { return scale(a, s); }
Tensor div(const Tensor& a, double s) {
  ACC_CHECK(s != 0.0, "div: division of ", a.describe(), " by the scalar 0");
  return scale(a, 1.0 / s);
}
Tensor neg(const Tensor& a) { return scale(a, -1.0); }

}  // namespace acc::ops
