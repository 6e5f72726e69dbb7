# Compile options shared by every acc target, applied through the acc_options interface target.
add_library(acc_options INTERFACE)
target_compile_options(acc_options INTERFACE -Wall -Wextra)
if(ACC_WERROR)
  target_compile_options(acc_options INTERFACE -Werror)
endif()
if(CMAKE_BUILD_TYPE STREQUAL "Release" OR CMAKE_BUILD_TYPE STREQUAL "RelWithDebInfo")
  # x86-64-v3 (AVX2, FMA, F16C) is the baseline; wider paths are chosen at run time.
  target_compile_options(acc_options INTERFACE -O3 -march=x86-64-v3 -mtune=generic)
endif()
if(ACC_SANITIZE)
  target_compile_options(acc_options INTERFACE -fsanitize=address,undefined -fno-omit-frame-pointer
                         -fno-sanitize-recover=undefined)
  target_link_options(acc_options INTERFACE -fsanitize=address,undefined)
endif()
