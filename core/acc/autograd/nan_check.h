#pragma once
// Debug aid: with ACC_CHECK_NAN=1 in the environment (or set_nan_checks(true)), every recorded
// op's forward output and every gradient a backward produces is scanned, and the first NaN or
// infinity throws acc::Error naming the op, the tensor and the element. Off by default: the
// scan reads every activation once more.
#include <string_view>

#include "acc/tensor/tensor.h"

namespace acc::autograd {

bool nan_checks_enabled();
void set_nan_checks(bool on);

// Throws when t (f32 or bf16) holds a NaN or infinity; integers pass. `what` says which tensor
// ("output", "gradient for input 1").
void check_finite(const Tensor& t, std::string_view op, std::string_view what);

}  // namespace acc::autograd
