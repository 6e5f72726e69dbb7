#pragma once
// The constants of acc's vector exp (Cephes' range reduction and degree-6 polynomial), shared by
// the 8-lane (avx2_math.h) and 16-lane (avx512_math.h) versions so they cannot drift apart.
namespace acc::kernels::detail::exp_constants {

inline constexpr float kLo = -87.3365447504f;  // ln(FLT_MIN): below, exp is 0 (no denormals)
inline constexpr float kHi = 88.7228391117f;   // ln(FLT_MAX): above, exp is +inf
inline constexpr float kLog2e = 1.44269504089f;
// ln 2 split in two so x - n ln2 is exact in f32.
inline constexpr float kLn2Hi = 0.693359375f;
inline constexpr float kLn2Lo = -2.12194440e-4f;
// exp(r) ~ 1 + r + r^2 (p0 + p1 r + ... + p5 r^5), highest power first.
inline constexpr float kPoly[6] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                                   4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};

}  // namespace acc::kernels::detail::exp_constants
