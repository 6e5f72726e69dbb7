#pragma once
// A simulated link between nodes, to measure on one machine what communication across machines
// would cost. ACC_SIM_CROSS_NODE_GBPS (gigabits per second) and ACC_SIM_CROSS_NODE_LATENCY_US
// (default 0) pace every collective of a group whose ranks span nodes (ACC_RANKS_PER_NODE
// simulates nodes): it completes no sooner than latency + the bytes this rank sends (ring
// schedule, dist::traffic()) / bandwidth after the link is free. Paced collectives running side
// by side (the comm engine's two lanes) share the link: each books its time after what the
// others booked. Within a lane the engine runs collectives one at a time, so a node-local
// collective queued behind a paced one waits for it too (stricter than a machine whose links
// work apart). The paced time counts against
// ACC_COMM_TIMEOUT, and a collective that outlasts it names this rank as the one not done.
// A point-to-point message from another node is paced at its receiver: the receive completes
// no sooner than latency + its bytes / bandwidth after it arrived, booked on the receiver's
// link (so a receive posted after the message came pays the whole time then: pessimistic where
// a real link would have carried it meanwhile). Sends complete as MPI completes them. Unset: no
// effect. Every timing taken with it set is simulated and must say so.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "schedule.h"

namespace acc::mpi {

struct SimLink {
  double gigabits_per_second = 0;
  double latency_us = 0;

  double seconds_for(uint64_t bytes) const {
    return latency_us * 1e-6 + static_cast<double>(bytes) * 8.0 / (gigabits_per_second * 1e9);
  }
  std::string describe() const;  // "10 Gb/s, 20 us latency (simulated: ACC_SIM_CROSS_NODE_GBPS)"
};

// When the bytes handed to the link so far will have crossed it.
class LinkClock {
 public:
  using Clock = std::chrono::steady_clock;
  // Books `duration` of the link after what is booked already (or from now, if it is free);
  // returns when it ends.
  Clock::time_point book(Clock::duration duration);

 private:
  std::mutex mutex_;
  Clock::time_point free_{};
};

// From the environment; nothing when ACC_SIM_CROSS_NODE_GBPS is unset. A bad value is an error
// naming the variable and what is expected.
std::optional<SimLink> sim_link_from_environment();

// Makes `schedule` end no sooner than the link.seconds_for(bytes) it books on `clock` when it
// starts: a last round that waits for that time (on whichever thread runs the schedule).
void pace(Schedule& schedule, const SimLink& link, LinkClock& clock, uint64_t bytes, int group_rank);
// Makes `schedule` end no sooner than link.seconds_for(bytes) after its other rounds: a last round
// that books that time on `clock` when it begins (a receive: once the message is here).
void pace_arrival(Schedule& schedule, const SimLink& link, LinkClock& clock, uint64_t bytes, int group_rank);

}  // namespace acc::mpi
