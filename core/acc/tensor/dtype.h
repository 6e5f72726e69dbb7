#pragma once
// Element types of acc tensors. bf16 is stored as its 16 raw bits (the top half of an f32).
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace acc {

enum class DType : uint8_t { f32, bf16, i32, i64 };

struct bfloat16 {
  uint16_t bits = 0;
};

constexpr size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::bf16: return 2;
    case DType::i32: return 4;
    case DType::i64: return 8;
  }
  return 0;
}

constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
  }
  return "?";
}

constexpr bool is_floating(DType t) { return t == DType::f32 || t == DType::bf16; }

// The DType of a C++ element type, for the checked Tensor::data<T>().
template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };

}  // namespace acc
