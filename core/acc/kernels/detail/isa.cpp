#include "acc/kernels/detail/isa.h"

#include <cstdlib>
#include <string>

namespace acc::kernels::detail {

bool use_avx512() {
  static const bool yes = [] {
    const char* off = std::getenv("ACC_NO_AVX512");
    return __builtin_cpu_supports("avx512f") && !(off != nullptr && std::string(off) == "1");
  }();
  return yes;
}

}  // namespace acc::kernels::detail
