#include "acc/util/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "acc/util/error.h"

namespace acc::log {
namespace {

std::shared_ptr<spdlog::logger> make_logger() {
  auto logger = spdlog::stderr_color_mt("acc");
  logger->set_pattern("[%H:%M:%S.%e] [acc] [%^%l%$] %v");
  spdlog::level::level_enum level = spdlog::level::info;
  if (const char* env = std::getenv("ACC_LOG_LEVEL"); env && *env) {
    level = spdlog::level::from_str(env);
    // spdlog maps unknown names to "off"; treat that as a user error unless they asked for off.
    ACC_CHECK(level != spdlog::level::off || std::string(env) == "off",
              "ACC_LOG_LEVEL='", env, "' is not a level; expected one of trace, debug, info, ",
              "warn, error, critical, off");
  }
  logger->set_level(level);
  return logger;
}

std::shared_ptr<spdlog::logger>& instance() {
  static std::shared_ptr<spdlog::logger> logger = make_logger();
  return logger;
}

}  // namespace

void init() { (void)instance(); }

void set_rank(int rank, int world_size) {
  if (rank < 0)
    instance()->set_pattern("[%H:%M:%S.%e] [acc] [%^%l%$] %v");
  else
    instance()->set_pattern("[%H:%M:%S.%e] [acc rank " + std::to_string(rank) + "/" +
                            std::to_string(world_size) + "] [%^%l%$] %v");
}

spdlog::logger& logger() { return *instance(); }

}  // namespace acc::log
