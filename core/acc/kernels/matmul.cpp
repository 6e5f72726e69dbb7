#include "acc/kernels/matmul.h"

#include <compare>
#include <dnnl.hpp>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "acc/kernels/convert.h"
#include "acc/kernels/detail/onednn_headroom.h"
#include "acc/memory/allocator.h"
#include "acc/util/error.h"

namespace acc::kernels {
namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One stream per calling thread, so concurrent callers never share stream state.
dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

dt dnnl_type(DType t) { return t == DType::bf16 ? dt::bf16 : dt::f32; }

// Everything a oneDNN matmul primitive is specialised on.
struct PrimitiveKey {
  int64_t batch, M, N, K;
  bool trans_a, trans_b;
  DType ab_type, c_type;
  bool accumulate, bias;
  auto operator<=>(const PrimitiveKey&) const = default;
};

// oneDNN objects built once per key and shared: executing one from several threads at once is
// allowed by oneDNN, so only lookup and insertion take the lock.
template <class Key, class Value>
class BuiltOnce {
 public:
  template <class Make>
  const Value& get(const Key& key, Make make) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = built_.find(key);
    if (it == built_.end()) it = built_.emplace(key, std::make_unique<Value>(make())).first;
    return *it->second;
  }

 private:
  std::mutex mutex_;
  std::map<Key, std::unique_ptr<Value>> built_;
};

// A logical [batch,] rows x cols matrix, densely stored either row-major or (transposed) as
// cols x rows; transposition is expressed purely through strides, so nothing is copied.
dnnl::memory::desc matrix_desc(int64_t batch, int64_t rows, int64_t cols, bool stored_transposed,
                               dt type) {
  const int64_t row_stride = stored_transposed ? 1 : cols;
  const int64_t col_stride = stored_transposed ? rows : 1;
  if (batch == 1) return {dims{rows, cols}, type, dims{row_stride, col_stride}};
  return {dims{batch, rows, cols}, type, dims{rows * cols, row_stride, col_stride}};
}

// oneDNN's failures named: what failed, and out of memory when that is why.
[[noreturn]] void fail_onednn(const std::string& what, const dnnl::error& e) {
  ACC_FAIL(e.status == dnnl_out_of_memory ? "out of memory: " : "", what, " failed in oneDNN: ", e.what());
}

// make() builds a oneDNN primitive named by what(), after making sure the memory for it can be
// had (detail/onednn_headroom.h).
template <class Make>
auto build_primitive(const std::function<std::string()>& what, Make make) {
  detail::expect_build_headroom(what);
  try {
    return make();
  } catch (const dnnl::error& e) {
    fail_onednn("building the kernel of " + what(), e);
  }
}

// run(stream) executes a primitive on this thread's stream, its OpenMP team started first.
template <class Run>
void run_primitive(const std::function<std::string()>& what, Run run) {
  detail::start_thread_team(what);
  try {
    dnnl::stream& stream = thread_stream();
    run(stream);
    stream.wait();
  } catch (const dnnl::error& e) {
    fail_onednn(what(), e);
  }
}

std::string describe(const PrimitiveKey& k) {
  std::string s = "the " + std::string(dtype_name(k.ab_type)) + " product ";
  if (k.batch != 1) s += std::to_string(k.batch) + " x ";
  return s + "[" + std::to_string(k.M) + " x " + std::to_string(k.K) + "] x [" + std::to_string(k.K) + " x " +
         std::to_string(k.N) + "] -> " + std::string(dtype_name(k.c_type));
}

struct Product {
  dnnl::memory::desc a, b, c, bias;
  dnnl::matmul primitive;
};

Product make_product(const PrimitiveKey& k) {
  Product p;
  p.a = matrix_desc(k.batch, k.M, k.K, k.trans_a, dnnl_type(k.ab_type));
  p.b = matrix_desc(k.batch, k.K, k.N, k.trans_b, dnnl_type(k.ab_type));
  p.c = matrix_desc(k.batch, k.M, k.N, false, dnnl_type(k.c_type));
  if (k.bias)
    p.bias = k.batch == 1 ? dnnl::memory::desc(dims{1, k.N}, dt::f32, dims{k.N, 1})
                          : dnnl::memory::desc(dims{1, 1, k.N}, dt::f32, dims{k.N, k.N, 1});
  dnnl::primitive_attr attr;
  if (k.accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.f);
    attr.set_post_ops(ops);
  }
  const dnnl::matmul::desc desc =
      k.bias ? dnnl::matmul::desc(p.a, p.b, p.bias, p.c) : dnnl::matmul::desc(p.a, p.b, p.c);
  p.primitive = dnnl::matmul(dnnl::matmul::primitive_desc(desc, attr, cpu_engine()));
  return p;
}

const Product& cached_product(const PrimitiveKey& k) {
  static BuiltOnce<PrimitiveKey, Product> products;
  return products.get(k, [&] {
    return build_primitive([&] { return describe(k); }, [&] { return make_product(k); });
  });
}

void execute(const PrimitiveKey& k, const void* A, const void* B, void* C, const float* bias) {
  const Product& p = cached_product(k);
  run_primitive([&] { return describe(k); }, [&](dnnl::stream& stream) {
    auto& eng = cpu_engine();
    std::unordered_map<int, dnnl::memory> args{
        {DNNL_ARG_SRC, dnnl::memory(p.a, eng, const_cast<void*>(A))},
        {DNNL_ARG_WEIGHTS, dnnl::memory(p.b, eng, const_cast<void*>(B))},
        {DNNL_ARG_DST, dnnl::memory(p.c, eng, C)}};
    if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(p.bias, eng, const_cast<float*>(bias)));
    p.primitive.execute(stream, args);
  });
}

void check_shape(const char* op, const MatmulShape& s) {
  ACC_CHECK(s.M >= 0 && s.N >= 0 && s.K >= 0, op, ": expected non-negative sizes, got M=", s.M,
            " N=", s.N, " K=", s.K);
  ACC_CHECK(is_floating(s.ab_type) && is_floating(s.c_type), op,
            ": A/B and C must be f32 or bf16, got ab_type=", dtype_name(s.ab_type),
            " c_type=", dtype_name(s.c_type));
  ACC_CHECK(!s.accumulate || s.c_type == DType::f32, op,
            ": accumulate needs an f32 C, got c_type=", dtype_name(s.c_type));
}

// K == 0: the product is all zeros, so C becomes (or keeps, with accumulate) just the bias.
void empty_product(int64_t rows, void* C, const MatmulShape& s, const float* bias) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < s.N; ++j) {
      const float add = bias ? bias[j] : 0.f;
      if (s.c_type == DType::f32) {
        float& c = static_cast<float*>(C)[i * s.N + j];
        c = (s.accumulate ? c : 0.f) + add;
      } else {
        static_cast<bfloat16*>(C)[i * s.N + j] = to_bf16(add);
      }
    }
}

// An uninitialised buffer from the counting allocator, freed at scope exit. (A std::vector
// would zero-fill tens of MB per call before the conversion overwrites them.)
class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(size_t bytes) : data_(memory::allocate(bytes, memory::Category::activations)), bytes_(bytes) {}
  Scratch(Scratch&& o) noexcept : data_(std::exchange(o.data_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  Scratch& operator=(Scratch&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~Scratch() { memory::deallocate(data_, bytes_, memory::Category::activations); }
  void* data() const { return data_; }
  float* f32() const { return static_cast<float*>(data_); }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// On AMX, oneDNN's bf16 matmul is slow when B is stored K x N or A is stored transposed (the
// two products of a linear layer's backward, dX = dY W and dW = dY^T X), once the operands are
// large: one thread on an Intel Xeon with AMX, 2048 tokens, GPT-2 XL's linears 479-795 GFLOP/s
// for dX and 440-529 for dW, against 682-982 and 627-718 with the operand first copied into
// the other layout (a reorder: 2-9 ms of a 30-100 ms product). Small operands lose by the
// copy (a 768-wide dW of GPT-2 small 5-20%), so only these take it: B of 2^20 elements or more
// with 1024 rows of A or more, and A when M, N and K are all 1024 or more.
bool relayout_b(const MatmulShape& s) { return !s.trans_b && s.K * s.N >= (int64_t{1} << 20) && s.M >= 1024; }
bool relayout_a(const MatmulShape& s) { return s.trans_a && s.M >= 1024 && s.N >= 1024 && s.K >= 1024; }

bool amx() {
  static const bool yes = dnnl::get_effective_cpu_isa() == dnnl::cpu_isa::avx512_core_amx;
  return yes;
}

// dst = src as a logical bf16 rows x cols matrix, stored the other way round (transposed if
// src is not, and the reverse).
void relayout_bf16(const void* src, void* dst, int64_t rows, int64_t cols, bool src_transposed) {
  static BuiltOnce<std::tuple<int64_t, int64_t, bool>, dnnl::reorder> reorders;
  const dnnl::memory::desc from = matrix_desc(1, rows, cols, src_transposed, dt::bf16);
  const dnnl::memory::desc to = matrix_desc(1, rows, cols, !src_transposed, dt::bf16);
  const std::function<std::string()> what = [&] {
    return "the bf16 relayout of a " + std::to_string(rows) + " x " + std::to_string(cols) + " matrix";
  };
  const dnnl::reorder& reorder = reorders.get({rows, cols, src_transposed}, [&] {
    return build_primitive(what, [&] {
      return dnnl::reorder(dnnl::reorder::primitive_desc(cpu_engine(), from, cpu_engine(), to));
    });
  });
  run_primitive(what, [&](dnnl::stream& stream) {
    auto& eng = cpu_engine();
    dnnl::memory in(from, eng, const_cast<void*>(src)), out(to, eng, dst);
    reorder.execute(stream, in, out);
  });
}

// `batch` dense products laid out back to back.
void dense_products(int64_t batch, const void* A, const void* B, void* C, const MatmulShape& s,
                    const float* bias) {
  if (s.M == 0 || s.N == 0) return;
  if (s.K == 0) return empty_product(batch * s.M, C, s, bias);
  PrimitiveKey key{batch,     s.M,       s.N,      s.K,          s.trans_a,
                   s.trans_b, s.ab_type, s.c_type, s.accumulate, bias != nullptr};
  Scratch a_copy, b_copy;
  if (s.ab_type == DType::bf16 && !has_native_bf16()) {
    // No native bf16: widen the operands once and run the f32 GEMM (see matmul.h for why).
    const int64_t a_n = batch * s.M * s.K, b_n = batch * s.K * s.N;
    a_copy = Scratch(static_cast<size_t>(a_n) * 4);
    b_copy = Scratch(static_cast<size_t>(b_n) * 4);
    bf16_to_f32(static_cast<const bfloat16*>(A), a_copy.f32(), a_n);
    bf16_to_f32(static_cast<const bfloat16*>(B), b_copy.f32(), b_n);
    A = a_copy.data(), B = b_copy.data();
    key.ab_type = DType::f32;
  } else if (s.ab_type == DType::bf16 && amx() && batch == 1) {
    if (relayout_a(s)) {
      a_copy = Scratch(static_cast<size_t>(s.M * s.K) * 2);
      relayout_bf16(A, a_copy.data(), s.M, s.K, true);
      A = a_copy.data(), key.trans_a = false;
    }
    if (relayout_b(s)) {
      b_copy = Scratch(static_cast<size_t>(s.K * s.N) * 2);
      relayout_bf16(B, b_copy.data(), s.K, s.N, false);
      B = b_copy.data(), key.trans_b = true;
    }
  }
  if (key.ab_type == DType::bf16 || key.c_type == DType::f32) return execute(key, A, B, C, bias);
  // oneDNN has no f32 x f32 -> bf16 matmul: produce f32, then round.
  Scratch c32(static_cast<size_t>(batch * s.M * s.N) * 4);
  key.c_type = DType::f32;
  execute(key, A, B, c32.data(), bias);
  f32_to_bf16(c32.f32(), static_cast<bfloat16*>(C), batch * s.M * s.N);
}

}  // namespace

bool has_native_bf16() {
  static const bool native = [] {
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  }();
  return native;
}

std::string onednn_description() {
  const dnnl_version_t* v = dnnl_version();
  const char* isa = "other";
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx2: isa = "avx2"; break;
    case dnnl::cpu_isa::avx2_vnni: isa = "avx2_vnni"; break;
    case dnnl::cpu_isa::avx512_core: isa = "avx512_core"; break;
    case dnnl::cpu_isa::avx512_core_vnni: isa = "avx512_core_vnni"; break;
    case dnnl::cpu_isa::avx512_core_bf16: isa = "avx512_core_bf16"; break;
    case dnnl::cpu_isa::avx512_core_amx: isa = "avx512_core_amx"; break;
    default: break;
  }
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + ", ISA " + isa;
}

void matmul(const void* A, const void* B, void* C, const MatmulShape& s, const float* bias) {
  check_shape("matmul", s);
  dense_products(1, A, B, C, s, bias);
}

void batched_matmul(int64_t batch, const void* A, int64_t stride_a, const void* B, int64_t stride_b,
                    void* C, int64_t stride_c, const MatmulShape& s) {
  check_shape("batched_matmul", s);
  ACC_CHECK(batch >= 0, "batched_matmul: expected a non-negative batch, got ", batch);
  if (batch == 0) return;
  if (stride_a == s.M * s.K && stride_b == s.K * s.N && stride_c == s.M * s.N)
    return dense_products(batch, A, B, C, s, nullptr);
  const size_t ab = dtype_size(s.ab_type), c = dtype_size(s.c_type);
  for (int64_t i = 0; i < batch; ++i)
    dense_products(1, static_cast<const char*>(A) + i * stride_a * ab,
                   static_cast<const char*>(B) + i * stride_b * ab,
                   static_cast<char*>(C) + i * stride_c * c, s, nullptr);
}

}  // namespace acc::kernels
