#pragma once
// Chunked oneTBB loop for the memory-bound kernels: below one grain it runs inline, so tiny
// inputs pay no task overhead.
#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cstdint>

namespace acc::kernels::detail {

// Elements of work worth one task (~tens of microseconds of streaming).
constexpr int64_t kElemsPerTask = int64_t{1} << 15;

// Calls fn(begin, end) over sub-ranges of [0, n) of at least `grain` items.
template <class Fn>
void parallel_ranges(int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  if (n <= grain) return fn(int64_t{0}, n);
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, std::max<int64_t>(1, grain)),
                    [&](const tbb::blocked_range<int64_t>& r) { fn(r.begin(), r.end()); });
}

// Rows of `cols` elements per task so that each task streams about kElemsPerTask values.
inline int64_t rows_grain(int64_t cols) { return std::max<int64_t>(1, kElemsPerTask / std::max<int64_t>(1, cols)); }

}  // namespace acc::kernels::detail
