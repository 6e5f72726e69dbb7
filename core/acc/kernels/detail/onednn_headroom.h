#pragma once
// oneDNN near a memory limit (ulimit -d or -v). When oneDNN builds a kernel for a new shape it
// generates machine code, and when that memory is refused it segfaults (0-0.5 MiB left, on the
// AMD EPYC) or throws its bare "could not create a primitive" (1 MiB); its first product on a
// thread starts that thread's OpenMP team, whose stacks libgomp cannot do without (it ends the
// process). So matmul asks for that memory first, mapping it and giving it back untouched, and
// raises "out of memory: <what> needs ..." when the process may not map it. Best effort: another
// thread may take the memory in between, and when oneDNN runs a smaller team libgomp lets the
// extra threads go, to start them again later (glibc keeps up to 40 MiB of their stacks for
// that). Internal to acc::kernels (matmul.cpp).
#include <functional>
#include <string>

namespace acc::kernels::detail {

// Before oneDNN builds a primitive; `what()` names it in the error.
void expect_build_headroom(const std::function<std::string()>& what);

// Before a primitive runs on this thread: once per thread (and again if the thread count grows),
// checks the stacks of the OpenMP team can be mapped, then starts the team at full size.
void start_thread_team(const std::function<std::string()>& what);

}  // namespace acc::kernels::detail
