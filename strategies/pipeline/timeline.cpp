#include "timeline.h"

#include <cstdlib>
#include <fstream>
#include <iomanip>

#include "acc/util/error.h"
#include "acc/util/profiler.h"

namespace acc::pipeline {

Timeline::Timeline() {
  if (const char* prefix = std::getenv("ACC_PIPELINE_TIMELINE")) prefix_ = prefix;
}

void Timeline::record(const Action& action, Clock::time_point start, Clock::time_point end) {
  if (profiler::enabled()) {
    using K = Action::Kind;
    const char* mark = action.kind == K::forward    ? "pipeline.forward"
                       : action.kind == K::backward ? "pipeline.backward"
                                                    : "pipeline.weight";
    profiler::add(mark, std::chrono::duration<double>(end - start).count(), true);
  }
  if (prefix_.empty()) return;
  auto since = [&](Clock::time_point t) { return std::chrono::duration<double>(t - step_start_).count(); };
  spans_.push_back({action, since(start), since(end)});
}

void Timeline::end_step(int rank) const {
  if (prefix_.empty()) return;
  const std::string path = prefix_ + ".rank" + std::to_string(rank) + ".tsv";
  std::ofstream out(path + ".tmp");
  // The step's start on the steady clock, which all processes of a machine share: the plot lines
  // the ranks' rows up by it (to the microsecond: the clock counts from boot).
  out << "# step_start_s\t" << std::fixed << std::setprecision(6)
      << std::chrono::duration<double>(step_start_.time_since_epoch()).count() << '\n'
      << std::defaultfloat;
  for (const Span& s : spans_)
    out << "FBW"[static_cast<int>(s.action.kind)] << '\t' << s.action.microbatch << '\t'
        << s.action.chunk << '\t' << s.start_s << '\t' << s.end_s << '\n';
  out.close();
  ACC_CHECK(out, "ACC_PIPELINE_TIMELINE: cannot write ", path);
  std::rename((path + ".tmp").c_str(), path.c_str());
}

}  // namespace acc::pipeline
