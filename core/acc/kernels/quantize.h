#pragma once
// Block-wise symmetric int8 and int4 quantization: what ZeRO++ sends instead of f32 or bf16
// (qwZ for weight gathers, qgZ for gradient reductions). The n elements go in blocks of `block`
// (the last may be shorter), each with one f32 scale, max |x| / L over the block, and
// q = round-to-nearest-even(x * (L / max |x|)), in [-L, L], where L is 127 for int8 and 7 for
// int4. Back, x' = q * scale, so every element comes back within half its block's scale (plus
// f32 rounding). A block whose largest magnitude is below 1e-30 (zeros among them) has scale 0
// and comes back as zeros. Inputs must be finite. int4 packs two values a byte, element 2i in
// the low nibble of byte i, so its blocks must be of an even number of elements.
#include <cstdint>

#include "acc/tensor/dtype.h"

namespace acc::kernels {

inline constexpr int64_t kQuantBlock = 256;  // elements per scale, ZeRO++'s default granularity

// ceil(n / block): the scales n elements need.
inline int64_t quant_blocks(int64_t n, int64_t block) { return (n + block - 1) / block; }

// Vectorised (AVX-512 when the CPU has it, AVX2 otherwise) and parallel over large n.
// q holds n values, scales quant_blocks(n, block).
void quantize_int8(const float* x, int64_t n, int64_t block, int8_t* q, float* scales);
void dequantize_int8(const int8_t* q, const float* scales, int64_t n, int64_t block, float* out);
// Straight into the compute dtype, as a quantized gather lands.
void dequantize_int8(const int8_t* q, const float* scales, int64_t n, int64_t block, bfloat16* out);
// packed holds (n + 1) / 2 bytes (an odd n leaves the last high nibble 0).
void quantize_int4(const float* x, int64_t n, int64_t block, uint8_t* packed, float* scales);
void dequantize_int4(const uint8_t* packed, const float* scales, int64_t n, int64_t block, float* out);

// One message of a quantized collective of `bits` (8 or 4): the n values (padded to whole
// 4-byte words), then their quant_blocks(n, block) f32 scales. quantized_message_bytes is its
// size.
int64_t quantized_message_bytes(int64_t n, int64_t block, int bits);
void quantize_message(const float* x, int64_t n, int64_t block, int bits, void* message);
void dequantize_message(const void* message, int64_t n, int64_t block, int bits, float* out);

namespace ref {
void quantize_int8(const float* x, int64_t n, int64_t block, int8_t* q, float* scales);
void dequantize_int8(const int8_t* q, const float* scales, int64_t n, int64_t block, float* out);
void quantize_int4(const float* x, int64_t n, int64_t block, uint8_t* packed, float* scales);
void dequantize_int4(const uint8_t* packed, const float* scales, int64_t n, int64_t block, float* out);
}  // namespace ref

}  // namespace acc::kernels
