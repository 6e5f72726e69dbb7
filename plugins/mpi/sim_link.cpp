#include "sim_link.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <sstream>

#include "acc/util/error.h"

namespace acc::mpi {
namespace {

// The variable's value as a number in [min, max], or nothing when unset.
std::optional<double> number_env(const char* name, double min, double max, const char* unit) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(value, &end);
  ACC_CHECK(*end == '\0' && v >= min && v <= max, name, "='", value, "' is not valid; expected ",
            min > 0 ? "a positive number" : "a number >= 0", " of ", unit, " up to ", max);
  return v;
}

}  // namespace

std::string SimLink::describe() const {
  std::ostringstream os;
  os << gigabits_per_second << " Gb/s, " << latency_us
     << " us latency (simulated: ACC_SIM_CROSS_NODE_GBPS, ACC_SIM_CROSS_NODE_LATENCY_US)";
  return os.str();
}

std::optional<SimLink> sim_link_from_environment() {
  // Bounded so that a collective's time stays a few orders below ACC_COMM_TIMEOUT's scale.
  const auto gbps = number_env("ACC_SIM_CROSS_NODE_GBPS", 1e-6, 1e6, "gigabits per second");
  const auto latency = number_env("ACC_SIM_CROSS_NODE_LATENCY_US", 0, 1e6, "microseconds");
  ACC_CHECK(gbps || !latency, "ACC_SIM_CROSS_NODE_LATENCY_US is set without ACC_SIM_CROSS_NODE_GBPS; "
            "set the bandwidth of the simulated link too");
  if (!gbps) return std::nullopt;
  return SimLink{.gigabits_per_second = *gbps, .latency_us = latency.value_or(0.0)};
}

LinkClock::Clock::time_point LinkClock::book(Clock::duration duration) {
  std::lock_guard lock(mutex_);
  free_ = std::max(free_, Clock::now()) + duration;
  return free_;
}

namespace {

using Clock = LinkClock::Clock;

Clock::duration duration_for(const SimLink& link, uint64_t bytes) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(link.seconds_for(bytes)));
}

// A round that holds this rank until the time `until()` gives has passed: while the link is
// "busy" the round waits on the rank itself, no peer is missing.
Round link_busy(std::function<Clock::time_point()> until, int group_rank) {
  return Round{{}, [until = std::move(until), group_rank] {
                 return Clock::now() < until() ? std::vector<int>{group_rank} : std::vector<int>{};
               },
               {}};
}

}  // namespace

void pace(Schedule& schedule, const SimLink& link, LinkClock& clock, uint64_t bytes, int group_rank) {
  auto until = std::make_shared<Clock::time_point>();
  schedule.before = [until, duration = duration_for(link, bytes), &clock, first = std::move(schedule.before)] {
    *until = clock.book(duration);
    if (first) first();
  };
  schedule.rounds.push_back(link_busy([until] { return *until; }, group_rank));
}

void pace_arrival(Schedule& schedule, const SimLink& link, LinkClock& clock, uint64_t bytes, int group_rank) {
  // Booked when first polled: once the message has arrived.
  auto until = std::make_shared<std::optional<Clock::time_point>>();
  schedule.rounds.push_back(link_busy(
      [until, duration = duration_for(link, bytes), &clock] {
        if (!*until) *until = clock.book(duration);
        return **until;
      },
      group_rank));
}

}  // namespace acc::mpi
