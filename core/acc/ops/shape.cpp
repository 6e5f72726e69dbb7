#include "acc/ops/shape.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>

#include "acc/autograd/function.h"
#include "acc/kernels/transpose.h"
#include "acc/ops/detail.h"
#include "acc/util/profiler.h"

namespace acc::ops {

namespace {

using detail::new_output;

// Shape viewed as [outer, size(dim), inner] around one dimension.
struct AroundDim {
  int64_t outer = 1, size = 1, inner = 1;
};

AroundDim around(const Shape& shape, int64_t dim) {
  AroundDim a;
  for (int64_t i = 0; i < dim; ++i) a.outer *= shape[static_cast<size_t>(i)];
  a.size = shape[static_cast<size_t>(dim)];
  for (size_t i = static_cast<size_t>(dim) + 1; i < shape.size(); ++i) a.inner *= shape[i];
  return a;
}

// Copies the [outer, length, inner] block of a [outer, src_size, inner] tensor starting at
// src_start into a [outer, dst_size, inner] tensor at dst_start (element size `bytes`).
void copy_slab(const char* src, int64_t src_size, int64_t src_start, char* dst, int64_t dst_size,
               int64_t dst_start, int64_t length, const AroundDim& a, size_t bytes) {
  const size_t row = static_cast<size_t>(length * a.inner) * bytes;
  detail::parallel_range(a.outer, std::max<int64_t>(1, detail::kGrain / std::max<int64_t>(1, length * a.inner)),
                         [&](int64_t s, int64_t e) {
                           for (int64_t o = s; o < e; ++o)
                             std::memcpy(dst + static_cast<size_t>((o * dst_size + dst_start) * a.inner) * bytes,
                                         src + static_cast<size_t>((o * src_size + src_start) * a.inner) * bytes,
                                         row);
                         });
}

// Copies element-sized values; T is an unsigned integer of the element's width.
template <class T>
void gather_row(const char* src, int64_t offset, int64_t step, char* dst, int64_t count) {
  const T* s = reinterpret_cast<const T*>(src) + offset;
  T* d = reinterpret_cast<T*>(dst);
  for (int64_t j = 0; j < count; ++j) d[j] = s[j * step];
}

void gather_row(size_t bytes, const char* src, int64_t offset, int64_t step, char* dst, int64_t count) {
  switch (bytes) {
    case 2: return gather_row<uint16_t>(src, offset, step, dst, count);
    case 4: return gather_row<uint32_t>(src, offset, step, dst, count);
    default: return gather_row<uint64_t>(src, offset, step, dst, count);
  }
}

// out[b, c, r] = in[b, r, c] in cache-sized tiles (a strided row gather would touch a new
// cache line per element).
template <class T>
void transpose_tiles(const T* in, T* out, int64_t batch, int64_t R, int64_t C) {
  constexpr int64_t kTile = 32;
  const int64_t tiles_r = (R + kTile - 1) / kTile, tiles_c = (C + kTile - 1) / kTile;
  detail::parallel_range(batch * tiles_r * tiles_c, 4, [&](int64_t s, int64_t e) {
    for (int64_t t = s; t < e; ++t) {
      const int64_t b = t / (tiles_r * tiles_c), tr = (t / tiles_c) % tiles_r, tc = t % tiles_c;
      const T* src = in + b * R * C;
      T* dst = out + b * R * C;
      const int64_t r_end = std::min(R, (tr + 1) * kTile), c_end = std::min(C, (tc + 1) * kTile);
      for (int64_t r = tr * kTile; r < r_end; ++r)
        for (int64_t c = tc * kTile; c < c_end; ++c) dst[c * R + r] = src[r * C + c];
    }
  });
}

// 4-byte elements: kernels::transpose32 (AVX2 tiles, bits only) on strips of 64 columns, the
// strips over the thread pool.
void transpose_4_bytes(const float* in, float* out, int64_t batch, int64_t R, int64_t C) {
  constexpr int64_t kStrip = 64;
  const int64_t strips = (C + kStrip - 1) / kStrip;
  detail::parallel_range(batch * strips, 1, [&](int64_t s, int64_t e) {
    for (int64_t t = s; t < e; ++t) {
      const int64_t b = t / strips, c0 = t % strips * kStrip;
      kernels::transpose32(in + b * R * C + c0, C, out + b * R * C + c0 * R, R, R, std::min(kStrip, C - c0));
    }
  });
}

void transpose_last_two(const Tensor& x, Tensor& out) {
  const int64_t R = x.size(-2), C = x.size(-1), batch = R * C != 0 ? x.numel() / (R * C) : 0;
  switch (dtype_size(x.dtype())) {
    case 2: return transpose_tiles(static_cast<const uint16_t*>(x.raw_data()), static_cast<uint16_t*>(out.raw_data()), batch, R, C);
    case 4: return transpose_4_bytes(static_cast<const float*>(x.raw_data()), static_cast<float*>(out.raw_data()), batch, R, C);
    default: return transpose_tiles(static_cast<const uint64_t*>(x.raw_data()), static_cast<uint64_t*>(out.raw_data()), batch, R, C);
  }
}

bool swaps_only_last_two(const std::vector<int64_t>& dims) {
  const size_t rank = dims.size();
  if (rank < 2) return false;
  for (size_t i = 0; i + 2 < rank; ++i)
    if (dims[i] != static_cast<int64_t>(i)) return false;
  return dims[rank - 2] == static_cast<int64_t>(rank) - 1 && dims[rank - 1] == static_cast<int64_t>(rank) - 2;
}

Tensor permute_copy(const Tensor& x, const std::vector<int64_t>& dims) {
  const Shape& in = x.shape();
  const size_t rank = in.size();
  Shape out_shape(rank);
  std::vector<int64_t> in_strides(rank, 1), src_stride(rank);
  for (size_t i = rank; i-- > 1;) in_strides[i - 1] = in_strides[i] * in[i];
  for (size_t i = 0; i < rank; ++i) {
    out_shape[i] = in[static_cast<size_t>(dims[i])];
    src_stride[i] = in_strides[static_cast<size_t>(dims[i])];
  }
  Tensor out = new_output(out_shape, x.dtype());
  if (swaps_only_last_two(dims)) {
    transpose_last_two(x, out);
    return out;
  }
  const size_t bytes = dtype_size(x.dtype());
  const char* src = static_cast<const char*>(x.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  const int64_t last = rank ? out_shape[rank - 1] : 1;
  const int64_t rows = last ? out.numel() / last : 0;
  const int64_t last_step = rank ? src_stride[rank - 1] : 1;
  detail::parallel_range(rows, std::max<int64_t>(1, detail::kGrain / std::max<int64_t>(1, last)),
                         [&](int64_t s, int64_t e) {
    for (int64_t r = s; r < e; ++r) {
      // Source offset of output row r: decompose r over the output's leading dimensions.
      int64_t rem = r, offset = 0;
      for (size_t i = rank; i-- > 1;) {
        offset += (rem % out_shape[i - 1]) * src_stride[i - 1];
        rem /= out_shape[i - 1];
      }
      char* d = dst + static_cast<size_t>(r * last) * bytes;
      if (last_step == 1)
        std::memcpy(d, src + static_cast<size_t>(offset) * bytes, static_cast<size_t>(last) * bytes);
      else
        gather_row(bytes, src, offset, last_step, d, last);
    }
  });
  return out;
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  detail::check_defined(x, "reshape", "input");
  Tensor out = x.view(shape);
  autograd::record("reshape", out, {x}, [in_shape = x.shape()](const Tensor& g) {
    return std::vector<Tensor>{g.view(in_shape)};
  });
  return out;
}

Tensor view(const Tensor& x, const Shape& shape) { return reshape(x, shape); }

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  ACC_PROFILE("permute");
  detail::check_defined(x, "permute", "input");
  const int64_t rank = x.dim();
  std::vector<int64_t> norm(dims.size()), inverse(dims.size(), -1);
  bool valid = static_cast<int64_t>(dims.size()) == rank;
  for (size_t i = 0; valid && i < dims.size(); ++i) {
    valid = dims[i] >= -rank && dims[i] < rank;
    if (!valid) break;
    norm[i] = dims[i] < 0 ? dims[i] + rank : dims[i];
    valid = inverse[static_cast<size_t>(norm[i])] < 0;
    inverse[static_cast<size_t>(norm[i])] = static_cast<int64_t>(i);
  }
  ACC_CHECK(valid, "permute: dims ", shape_str(dims), " are not a permutation of the ", rank,
            " dimensions of ", x.describe());
  Tensor out = permute_copy(x, norm);
  autograd::record("permute", out, {x}, [inverse](const Tensor& g) {
    ACC_PROFILE("permute.backward");
    return std::vector<Tensor>{permute_copy(g, inverse)};
  });
  return out;
}

Tensor transpose(const Tensor& x) {
  detail::check_defined(x, "transpose", "input");
  ACC_CHECK(x.dim() >= 2, "transpose: needs at least 2 dimensions, got ", x.describe());
  std::vector<int64_t> dims(static_cast<size_t>(x.dim()));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[dims.size() - 1], dims[dims.size() - 2]);
  return permute(x, dims);
}

Tensor narrow(const Tensor& x, int64_t dim_in, int64_t start, int64_t length) {
  detail::check_defined(x, "narrow", "input");
  const int64_t dim = detail::wrap_dim(dim_in, x.dim(), "narrow");
  const AroundDim a = around(x.shape(), dim);
  ACC_CHECK(start >= 0 && length >= 0 && start + length <= a.size, "narrow: range [", start, ", ",
            start + length, ") is outside dimension ", dim, " of ", x.describe());
  Shape out_shape = x.shape();
  out_shape[static_cast<size_t>(dim)] = length;
  Tensor out = new_output(out_shape, x.dtype());
  copy_slab(static_cast<const char*>(x.raw_data()), a.size, start,
            static_cast<char*>(out.raw_data()), length, 0, length, a, dtype_size(x.dtype()));
  autograd::record("narrow", out, {x}, [a, start, length, in_shape = x.shape()](const Tensor& g) {
    Tensor dx = new_output(in_shape);
    dx.zero_();
    copy_slab(static_cast<const char*>(g.raw_data()), length, 0, static_cast<char*>(dx.raw_data()),
              a.size, start, length, a, sizeof(float));
    return std::vector<Tensor>{dx};
  });
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim_in) {
  ACC_PROFILE("split");
  detail::check_defined(x, "split", "input");
  const int64_t dim = detail::wrap_dim(dim_in, x.dim(), "split");
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
  ACC_CHECK(total == x.size(dim), "split: sizes ", shape_str(sizes), " add up to ", total,
            " but dimension ", dim, " of ", x.describe(), " has ", x.size(dim));
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t size : sizes) {
    out.push_back(narrow(x, dim, start, size));
    start += size;
  }
  return out;
}

Tensor concat(const std::vector<Tensor>& xs, int64_t dim_in) {
  ACC_PROFILE("concat");
  ACC_CHECK(!xs.empty(), "concat: needs at least one tensor");
  for (const auto& x : xs) detail::check_defined(x, "concat", "an input");
  const int64_t dim = detail::wrap_dim(dim_in, xs[0].dim(), "concat");
  Shape out_shape = xs[0].shape();
  out_shape[static_cast<size_t>(dim)] = 0;
  std::vector<int64_t> sizes;
  for (const auto& x : xs) {
    Shape expect = x.shape();
    bool same = x.dim() == xs[0].dim() && x.dtype() == xs[0].dtype();
    if (same) {
      expect[static_cast<size_t>(dim)] = xs[0].size(dim);
      same = expect == xs[0].shape();
    }
    ACC_CHECK(same, "concat: ", x.describe(), " does not match ", xs[0].describe(),
              " outside dimension ", dim);
    sizes.push_back(x.size(dim));
    out_shape[static_cast<size_t>(dim)] += x.size(dim);
  }
  Tensor out = new_output(out_shape, xs[0].dtype());
  const int64_t out_size = out_shape[static_cast<size_t>(dim)];
  int64_t start = 0;
  for (const auto& x : xs) {
    const AroundDim a = around(x.shape(), dim);
    copy_slab(static_cast<const char*>(x.raw_data()), a.size, 0, static_cast<char*>(out.raw_data()),
              out_size, start, a.size, a, dtype_size(x.dtype()));
    start += a.size;
  }
  autograd::record("concat", out, xs, [sizes, dim](const Tensor& g) {
    ACC_PROFILE("concat.backward");
    return split(g, sizes, dim);
  });
  return out;
}

Tensor cast(const Tensor& x, DType dtype) {
  ACC_PROFILE("cast");
  detail::check_defined(x, "cast", "input");
  if (x.dtype() == dtype) return x;  // already there: no copy (e.g. parameters gathered in bf16)
  Tensor out;
  {
    memory::CategoryScope scope(memory::Category::activations);
    out = x.to(dtype);
  }
  ACC_CHECK(is_floating(dtype) || !x.requires_grad(), "cast: ", x.describe(),
            " requires grad, so it can only be cast to f32 or bf16, not ", dtype_name(dtype));
  autograd::record("cast", out, {x}, [](const Tensor& g) { return std::vector<Tensor>{g}; });
  return out;
}

}  // namespace acc::ops
