#pragma once
// Logging through spdlog with one pattern for all of acc. The level comes from ACC_LOG_LEVEL
// (trace, debug, info, warn, error, off); the rank is part of every line once it is known.
#include <spdlog/spdlog.h>

namespace acc::log {

// Configures the "acc" logger from ACC_LOG_LEVEL; safe to call more than once.
void init();
// Sets the rank shown in each line ("[rank 1/4]"); -1 hides it (single process).
void set_rank(int rank, int world_size);
spdlog::logger& logger();

template <class... Args>
void info(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  logger().info(fmt, std::forward<Args>(args)...);
}
template <class... Args>
void warn(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  logger().warn(fmt, std::forward<Args>(args)...);
}
template <class... Args>
void debug(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  logger().debug(fmt, std::forward<Args>(args)...);
}
template <class... Args>
void error(spdlog::format_string_t<Args...> fmt, Args&&... args) {
  logger().error(fmt, std::forward<Args>(args)...);
}

}  // namespace acc::log
