// bench/kernels: every kernel at GPT-2-small shapes (B=8, T=512, C=768, 12 heads), next to a
// ceiling measured in the same run: matmuls against a bare oneDNN call (target >= 0.9x),
// memory-bound kernels against memcpy bandwidth (target >= 0.6x), attention against the f32 GEMM
// peak. Also checks that oneTBB and oneDNN's OpenMP pool do not slow each other down when they
// alternate, as they do in a training step.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "acc/kernels/activations.h"
#include "acc/kernels/attention.h"
#include "acc/kernels/convert.h"
#include "acc/kernels/quantize.h"
#include "acc/kernels/cross_entropy.h"
#include "acc/kernels/embedding.h"
#include "acc/kernels/matmul.h"
#include "acc/kernels/norms.h"
#include "acc/kernels/optimizer.h"
#include "acc/kernels/softmax.h"
#include "acc/kernels/transpose.h"
#include "acc/runtime/threads.h"
#include "acc/tensor/tensor.h"
#include "acc/train/cli.h"
#include "kernels/raw_onednn.h"
#include "support/measure.h"

namespace {

using acc::DType;
using acc::Tensor;
using acc::bench::Row;
using acc::bench::seconds_per_call;

Tensor random_f32(int64_t n, const char* name) { return Tensor::randn({n}, 1, name); }

struct GemmCase {
  const char* name;
  int64_t M, N, K;
  bool trans_b, trans_a = false;
};

// The products of one GPT-2-small block (linear layers use W[out,in], so forward is x W^T),
// forward and the two backward products, plus a slice of the vocabulary projection; and the
// backward products of GPT-2 medium's and XL's MLP at 2048 tokens, whose layouts oneDNN runs
// slowly on AMX when the operands are this large (acc copies them into the fast layout first:
// the raw call is the same layouts as given, so acc's ratio may exceed 1).
const std::vector<GemmCase> kGemms = {
    {"attn.c_attn fwd 4096x2304x768", 4096, 2304, 768, true},
    {"attn.c_proj fwd 4096x768x768", 4096, 768, 768, true},
    {"mlp.c_fc fwd 4096x3072x768", 4096, 3072, 768, true},
    {"mlp.c_proj fwd 4096x768x3072", 4096, 768, 3072, true},
    {"mlp.c_fc dX 4096x768x3072", 4096, 768, 3072, false},
    {"mlp.c_fc dW 3072x768x4096", 3072, 768, 4096, false, true},
    {"lm_head fwd 1024x50257x768", 1024, 50257, 768, true},
    {"medium mlp.c_fc dX 2048x1024x4096", 2048, 1024, 4096, false},
    {"medium mlp.c_fc dW 4096x1024x2048", 4096, 1024, 2048, false, true},
    {"XL mlp.c_fc dX 2048x1600x6400", 2048, 1600, 6400, false},
    {"XL mlp.c_fc dW 6400x1600x2048", 6400, 1600, 2048, false, true},
};

double gemm_gflops(const GemmCase& g, double seconds) { return 2.0 * g.M * g.N * g.K / seconds / 1e9; }

void bench_matmul(DType ab, std::vector<Row>& rows, double& peak) {
  const char* tag = ab == DType::f32 ? "f32" : "bf16";
  for (const GemmCase& g : kGemms) {
    Tensor a = random_f32(g.M * g.K, "a").to(ab), b = random_f32(g.N * g.K, "b").to(ab);
    Tensor c = Tensor::zeros({g.M * g.N});
    acc::kernels::MatmulShape s{g.M, g.N, g.K, g.trans_a, g.trans_b, ab, DType::f32, false};
    const double t_acc = seconds_per_call([&] { acc::kernels::matmul(a.raw_data(), b.raw_data(), c.raw_data(), s); });
    // Without native bf16, oneDNN 2.6 has no bf16 matmul at all: the ceiling is then the bare
    // f32 call on the same shape (acc converts bf16 inputs to f32 on such CPUs).
    const bool raw_bf16 = ab == DType::bf16 && acc::kernels::has_native_bf16();
    Tensor ra = ab == DType::bf16 && !raw_bf16 ? a.to(DType::f32) : a;
    Tensor rb = ab == DType::bf16 && !raw_bf16 ? b.to(DType::f32) : b;
    acc::bench::RawOnednnMatmul raw(g.M, g.N, g.K, g.trans_a, g.trans_b,
                                    raw_bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32);
    const double t_raw = seconds_per_call([&] { raw.run(ra.raw_data(), rb.raw_data(), c.data<float>()); });
    const double acc_gf = gemm_gflops(g, t_acc), raw_gf = gemm_gflops(g, t_raw);
    if (ab == DType::f32) peak = std::max(peak, raw_gf);
    rows.push_back({std::string("matmul ") + tag + " " + g.name, "GFLOP/s", acc_gf, raw_gf,
                    ab == DType::f32 || raw_bf16 ? "raw oneDNN" : "raw oneDNN f32", 0.9});
  }
}

// bytes = bytes read + written per call, for the ratio against memcpy's (read + write) rate.
void add_memory_bound(std::vector<Row>& rows, const std::string& name, double bytes, double seconds,
                      double memcpy_gbps) {
  rows.push_back({name, "GB/s", bytes / seconds / 1e9, memcpy_gbps, "memcpy", 0.6});
}

// transpose32 on GPT-2 small's MLP weight both ways (a checkpoint's Conv1D layout), one thread
// as the checkpoint code runs it: against a one-thread memcpy of the same bytes (no target: a
// transpose writes 16 strided streams where memcpy writes one) and the plain loop it replaces.
void bench_transpose(std::vector<Row>& rows) {
  const int64_t n = int64_t{768} * 3072;
  Tensor in = random_f32(n, "t"), out = Tensor::empty({n});
  const float* src = in.data<float>();
  float* dst = out.data<float>();
  const double one_thread_copy =
      8.0 * n / seconds_per_call([&] { std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float)); }) / 1e9;
  rows.push_back({"memcpy 9.4MB, one thread (read+write)", "GB/s", one_thread_copy, 0, "", 0});
  for (const auto& [r, c] : {std::pair<int64_t, int64_t>{768, 3072}, {3072, 768}}) {
    const std::string shape = std::to_string(r) + "x" + std::to_string(c);
    const double fast = seconds_per_call([&] { acc::kernels::transpose32(src, c, dst, r, r, c); });
    const double plain = seconds_per_call([&] { acc::kernels::ref::transpose32(src, c, dst, r, r, c); });
    rows.push_back({"transpose32 " + shape + ", one thread", "GB/s", 8.0 * n / fast / 1e9, one_thread_copy,
                    "memcpy one thread", 0});
    rows.push_back({"transpose32 " + shape + " plain loop", "GB/s", 8.0 * n / plain / 1e9, 8.0 * n / fast / 1e9,
                    "transpose32", 0});
  }
}

void bench_memory_bound(std::vector<Row>& rows, double bw) {
  const int64_t n = 16 << 20;  // 16M elements: ~1/8 of GPT-2 small's parameters (one rank's shard)
  Tensor p = random_f32(n, "p"), g = random_f32(n, "g"), m = Tensor::zeros({n}), v = Tensor::zeros({n});
  Tensor p16 = Tensor::empty({n}, DType::bf16);
  acc::kernels::AdamWParams h{1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1};
  add_memory_bound(rows, "adamw_step 16M", 28.0 * n,
                   seconds_per_call([&] { acc::kernels::adamw_step(p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(), n, h); }), bw);
  add_memory_bound(rows, "adamw_step 16M + bf16 copy", 30.0 * n,
                   seconds_per_call([&] { acc::kernels::adamw_step(p.data<float>(), g.data<float>(), m.data<float>(), v.data<float>(), n, h, p16.data<acc::bfloat16>()); }), bw);
  add_memory_bound(rows, "f32_to_bf16 16M", 6.0 * n,
                   seconds_per_call([&] { acc::kernels::f32_to_bf16(p.data<float>(), p16.data<acc::bfloat16>(), n); }), bw);
  add_memory_bound(rows, "bf16_to_f32 16M", 6.0 * n,
                   seconds_per_call([&] { acc::kernels::bf16_to_f32(p16.data<acc::bfloat16>(), g.data<float>(), n); }), bw);
  // ZeRO++'s int8 wire format, blocks of 256: f32 in, 1 byte + a scale per 256 out, and back.
  const int64_t blocks = acc::kernels::quant_blocks(n, acc::kernels::kQuantBlock);
  std::vector<int8_t> q(static_cast<size_t>(n));
  std::vector<float> scales(static_cast<size_t>(blocks));
  const double scale_bytes = 4.0 * static_cast<double>(blocks);
  add_memory_bound(rows, "quantize_int8 16M", 5.0 * n + scale_bytes,
                   seconds_per_call([&] { acc::kernels::quantize_int8(p.data<float>(), n, acc::kernels::kQuantBlock, q.data(), scales.data()); }), bw);
  add_memory_bound(rows, "dequantize_int8 16M to f32", 5.0 * n + scale_bytes,
                   seconds_per_call([&] { acc::kernels::dequantize_int8(q.data(), scales.data(), n, acc::kernels::kQuantBlock, g.data<float>()); }), bw);
  add_memory_bound(rows, "dequantize_int8 16M to bf16", 3.0 * n + scale_bytes,
                   seconds_per_call([&] { acc::kernels::dequantize_int8(q.data(), scales.data(), n, acc::kernels::kQuantBlock, p16.data<acc::bfloat16>()); }), bw);
  // And int4 (qgZ's narrower wire): half a byte a value, packed through int8 in L1-sized pieces.
  std::vector<uint8_t> packed(static_cast<size_t>((n + 1) / 2));
  add_memory_bound(rows, "quantize_int4 16M", 4.5 * n + scale_bytes,
                   seconds_per_call([&] { acc::kernels::quantize_int4(p.data<float>(), n, acc::kernels::kQuantBlock, packed.data(), scales.data()); }), bw);
  add_memory_bound(rows, "dequantize_int4 16M to f32", 4.5 * n + scale_bytes,
                   seconds_per_call([&] { acc::kernels::dequantize_int4(packed.data(), scales.data(), n, acc::kernels::kQuantBlock, g.data<float>()); }), bw);

  const int64_t R = 4096, C = 768;
  Tensor x = random_f32(R * C, "x"), y = Tensor::zeros({R * C}), dy = random_f32(R * C, "dy"), dx = Tensor::zeros({R * C});
  Tensor gamma = Tensor::full({C}, 1.0), beta = Tensor::zeros({C}), dgamma = Tensor::zeros({C}), dbeta = Tensor::zeros({C});
  Tensor mean = Tensor::zeros({R}), rstd = Tensor::zeros({R});
  add_memory_bound(rows, "layernorm_fwd 4096x768", 8.0 * R * C,
                   seconds_per_call([&] { acc::kernels::layernorm_fwd(x.data<float>(), gamma.data<float>(), beta.data<float>(), y.data<float>(), mean.data<float>(), rstd.data<float>(), R, C, 1e-5f); }), bw);
  add_memory_bound(rows, "layernorm_bwd 4096x768", 12.0 * R * C,
                   seconds_per_call([&] { acc::kernels::layernorm_bwd(dy.data<float>(), x.data<float>(), gamma.data<float>(), mean.data<float>(), rstd.data<float>(), dx.data<float>(), dgamma.data<float>(), dbeta.data<float>(), R, C); }), bw);
  const int64_t F = R * 4 * C;  // the MLP's hidden activations
  Tensor hx = random_f32(F, "h"), hy = Tensor::zeros({F}), hdy = random_f32(F, "hdy"), hdx = Tensor::zeros({F});
  add_memory_bound(rows, "gelu_fwd 4096x3072", 8.0 * F,
                   seconds_per_call([&] { acc::kernels::gelu_fwd(hx.data<float>(), hy.data<float>(), F); }), bw);
  add_memory_bound(rows, "gelu_bwd 4096x3072", 12.0 * F,
                   seconds_per_call([&] { acc::kernels::gelu_bwd(hdy.data<float>(), hx.data<float>(), hdx.data<float>(), F); }), bw);

  // A token lookup in GPT-2 medium's bf16 token table: only the looked-up rows are read.
  const int64_t lookups = 4096, vocab = 50257, width = 1024;
  Tensor table16 = Tensor::zeros({vocab * width}).to(DType::bf16), looked_up = Tensor::zeros({lookups * width});
  std::vector<int32_t> token_ids(lookups);
  for (int64_t i = 0; i < lookups; ++i) token_ids[i] = static_cast<int32_t>((i * 7919) % vocab);
  add_memory_bound(rows, "embedding_fwd 4096 rows of a bf16 50257x1024 table", 6.0 * lookups * width,
                   seconds_per_call([&] { acc::kernels::embedding_fwd(table16.data<acc::bfloat16>(), token_ids.data(), looked_up.data<float>(), lookups, vocab, width); }), bw);

  const int64_t N = 1024, V = 50257;
  Tensor logits = random_f32(N * V, "logits"), dlogits = Tensor::zeros({N * V});
  Tensor losses = Tensor::zeros({N}), lse = Tensor::zeros({N}), dloss = Tensor::full({N}, 1.0 / N);
  std::vector<int32_t> targets(N);
  for (int64_t i = 0; i < N; ++i) targets[i] = static_cast<int32_t>((i * 7919) % V);
  add_memory_bound(rows, "cross_entropy_fwd 1024x50257", 4.0 * N * V,
                   seconds_per_call([&] { acc::kernels::cross_entropy_fwd(logits.data<float>(), targets.data(), losses.data<float>(), lse.data<float>(), N, V); }), bw);
  add_memory_bound(rows, "cross_entropy_bwd 1024x50257", 8.0 * N * V,
                   seconds_per_call([&] { acc::kernels::cross_entropy_bwd(logits.data<float>(), targets.data(), lse.data<float>(), dloss.data<float>(), dlogits.data<float>(), N, V); }), bw);
  add_memory_bound(rows, "softmax_fwd 1024x50257", 8.0 * N * V,
                   seconds_per_call([&] { acc::kernels::softmax_fwd(logits.data<float>(), dlogits.data<float>(), N, V); }), bw);
}

void bench_attention(std::vector<Row>& rows, double peak) {
  acc::kernels::AttentionShape s{8, 12, 12, 512, 64, 0.f};
  const int64_t n = s.B * s.H * s.T * s.D;
  Tensor q = random_f32(n, "q"), k = random_f32(n, "k"), v = random_f32(n, "v"), o = Tensor::zeros({n});
  Tensor dout = random_f32(n, "do"), dq = Tensor::zeros({n}), dk = Tensor::zeros({n}), dv = Tensor::zeros({n});
  Tensor lse = Tensor::zeros({s.B * s.H * s.T});
  // Causal: half of the T*T scores; forward 2 products (QK^T, PV), backward 5 (incl. recompute).
  const double pair_flops = 2.0 * s.B * s.H * s.T * s.T * s.D / 2.0;
  const double t_f = seconds_per_call([&] { acc::kernels::attention_fwd(q.data<float>(), k.data<float>(), v.data<float>(), o.data<float>(), lse.data<float>(), s); });
  const double t_b = seconds_per_call([&] { acc::kernels::attention_bwd(dout.data<float>(), q.data<float>(), k.data<float>(), v.data<float>(), o.data<float>(), lse.data<float>(), dq.data<float>(), dk.data<float>(), dv.data<float>(), s); });
  rows.push_back({"attention_fwd B8 H12 T512 D64", "GFLOP/s", 2 * pair_flops / t_f / 1e9, peak, "f32 GEMM peak", 0});
  rows.push_back({"attention_bwd B8 H12 T512 D64", "GFLOP/s", 5 * pair_flops / t_b / 1e9, peak, "f32 GEMM peak", 0});
}

// A training step alternates oneDNN (OpenMP threads) and oneTBB kernels. If either pool's idle
// threads spin while the other works, alternating is slower than the two parts run apart.
void bench_pool_interplay(std::vector<Row>& rows) {
  const int64_t M = 4096, C = 768;
  Tensor a = random_f32(M * C, "a"), w = random_f32(C * C, "w"), c = Tensor::zeros({M * C});
  Tensor gamma = Tensor::full({C}, 1.0), beta = Tensor::zeros({C}), y = Tensor::zeros({M * C});
  Tensor mean = Tensor::zeros({M}), rstd = Tensor::zeros({M});
  acc::kernels::MatmulShape s{M, C, C, false, true, DType::f32, DType::f32, false};
  auto mm = [&] { acc::kernels::matmul(a.raw_data(), w.raw_data(), c.raw_data(), s); };
  auto ln = [&] { acc::kernels::layernorm_fwd(c.data<float>(), gamma.data<float>(), beta.data<float>(), y.data<float>(), mean.data<float>(), rstd.data<float>(), M, C, 1e-5f); };
  const double apart = seconds_per_call(mm) + seconds_per_call(ln);
  const double together = seconds_per_call([&] { mm(); ln(); });
  rows.push_back({"matmul+layernorm alternating (ms)", "ms", together * 1e3, apart * 1e3, "sum run apart", 0});
}

}  // namespace

int run(int argc, char** argv) {
  acc::train::Args args(argc, argv);
  const std::string out = args.get("out", "bench/results/kernels.json");
  args.finish();
  acc::runtime::set_num_threads(acc::runtime::default_num_threads());
  std::vector<Row> rows;
  double f32_peak = 0, unused = 0;
  const double bw = acc::bench::memcpy_gbps();
  rows.push_back({"memcpy 256MB (read+write)", "GB/s", bw, 0, "", 0});
  bench_matmul(DType::f32, rows, f32_peak);
  bench_matmul(DType::bf16, rows, unused);
  rows.push_back({"f32 GEMM peak (best raw oneDNN)", "GFLOP/s", f32_peak, 0, "", 0});
  bench_memory_bound(rows, bw);
  bench_transpose(rows);
  bench_attention(rows, f32_peak);
  bench_pool_interplay(rows);
  acc::bench::report("acc kernels at GPT-2-small shapes", rows, out,
                     {{"threads", std::to_string(acc::runtime::num_threads())},
                      {"native_bf16", acc::kernels::has_native_bf16() ? "yes" : "no"}});
  return 0;
}

int main(int argc, char** argv) {
  return acc::train::run_program("bench_kernels", [&] { return run(argc, argv); });
}
