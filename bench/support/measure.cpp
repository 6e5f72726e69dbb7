#include "support/measure.h"

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "acc/memory/allocator.h"
#include "acc/runtime/threads.h"

namespace acc::bench {

double seconds_per_call(const std::function<void()>& fn, double min_seconds) {
  using clock = std::chrono::steady_clock;
  fn();  // warm-up: caches, primitive creation, page faults
  const auto t0 = clock::now();
  fn();
  const double one = std::max(1e-9, std::chrono::duration<double>(clock::now() - t0).count());
  const int per_batch = std::max(1, static_cast<int>(0.05 / one));
  double best = one, spent = one;
  while (spent < min_seconds) {
    const auto b0 = clock::now();
    for (int i = 0; i < per_batch; ++i) fn();
    const double batch = std::chrono::duration<double>(clock::now() - b0).count();
    best = std::min(best, batch / per_batch);
    spent += batch;
  }
  return best;
}

double memcpy_gbps(size_t bytes) {
  char* src = static_cast<char*>(memory::allocate(bytes, memory::Category::other));
  char* dst = static_cast<char*>(memory::allocate(bytes, memory::Category::other));
  std::memset(src, 1, bytes);
  std::memset(dst, 0, bytes);
  // Copy in one chunk per thread, as the multi-threaded kernels compared with it do.
  const size_t chunk = bytes / static_cast<size_t>(runtime::num_threads()) + 1;
  const double s = seconds_per_call([&] {
    tbb::parallel_for(size_t{0}, bytes, chunk, [&](size_t begin) {
      std::memcpy(dst + begin, src + begin, std::min(chunk, bytes - begin));
    });
  });
  memory::deallocate(src, bytes, memory::Category::other);
  memory::deallocate(dst, bytes, memory::Category::other);
  return 2.0 * static_cast<double>(bytes) / s / 1e9;
}

std::string cpu_model() {
  // The model name alone does not tell machines apart here (one "AMD EPYC" has AVX-512, another
  // only AVX2), so the vector ISA that decides acc's kernels is added.
  std::ifstream in("/proc/cpuinfo");
  std::string model = "unknown", flags;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0 && model == "unknown") model = line.substr(line.find(':') + 2);
    if (line.rfind("flags", 0) == 0 && flags.empty()) flags = line + " ";
  }
  auto has = [&](const char* flag) { return flags.find(std::string(" ") + flag + " ") != std::string::npos; };
  const std::string isa = has("amx_tile")      ? "AVX-512, AMX"
                          : has("avx512_bf16") ? "AVX-512, AVX512-BF16"
                          : has("avx512f")     ? "AVX-512, no native bf16"
                          : has("avx2")        ? "AVX2, no AVX-512"
                                               : "no AVX2";
  return model + " (" + isa + ")";
}

std::string utc_timestamp() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

namespace {

std::map<std::string, double> previous_values(const std::string& json_path) {
  std::map<std::string, double> out;
  if (!std::filesystem::exists(json_path)) return out;
  try {
    std::ifstream in(json_path);
    Poco::JSON::Parser parser;
    auto root = parser.parse(in).extract<Poco::JSON::Object::Ptr>();
    auto rows = root->getArray("rows");
    for (size_t i = 0; i < rows->size(); ++i) {
      auto row = rows->getObject(static_cast<unsigned>(i));
      out[row->getValue<std::string>("name")] = row->getValue<double>("value");
    }
  } catch (const std::exception& e) {
    std::cerr << "note: ignoring unreadable previous results " << json_path << ": " << e.what() << "\n";
  }
  return out;
}

}  // namespace

void report(const std::string& title, const std::vector<Row>& rows, const std::string& json_path,
            const std::map<std::string, std::string>& context) {
  const auto previous = previous_values(json_path);
  std::printf("\n%s\n", title.c_str());
  for (const auto& [k, v] : context) std::printf("  %s: %s\n", k.c_str(), v.c_str());
  std::printf("%-44s %12s %-8s %10s %-22s %8s %8s\n", "name", "value", "unit", "ratio", "(of ceiling)",
              "target", "vs prev");
  Poco::JSON::Array::Ptr json_rows = new Poco::JSON::Array;
  for (const Row& r : rows) {
    char ratio[32] = "", target[32] = "", change[32] = "";
    if (r.ceiling > 0) std::snprintf(ratio, sizeof ratio, "%.2fx", r.value / r.ceiling);
    if (r.target > 0) {
      // Sizes, times and shares (idle, spread) are better when smaller: their target is a
      // ceiling, others' a floor.
      const bool smaller_is_better = r.unit == "MB" || r.unit == "ms" || r.unit == "s" || r.unit == "%";
      const double q = r.value / r.ceiling;
      const bool met = smaller_is_better ? q <= r.target : q >= r.target;
      std::snprintf(target, sizeof target, "%s%s%.2fx", met ? "" : "!", smaller_is_better ? "<=" : ">=", r.target);
    }
    if (auto it = previous.find(r.name); it != previous.end() && it->second > 0)
      std::snprintf(change, sizeof change, "%+.0f%%", 100.0 * (r.value / it->second - 1.0));
    std::printf("%-44s %12.2f %-8s %10s %-22s %8s %8s\n", r.name.c_str(), r.value, r.unit.c_str(), ratio,
                r.ceiling_name.c_str(), target, change);
    Poco::JSON::Object::Ptr o = new Poco::JSON::Object;
    o->set("name", r.name);
    o->set("unit", r.unit);
    o->set("value", r.value);
    o->set("ceiling", r.ceiling);
    o->set("ceiling_name", r.ceiling_name);
    o->set("target_ratio", r.target);
    json_rows->add(o);
  }
  Poco::JSON::Object root;
  root.set("title", title);
  root.set("cpu", cpu_model());
  root.set("date", utc_timestamp());
  for (const auto& [k, v] : context) root.set(k, v);
  root.set("rows", json_rows);
  std::ostringstream text;
  root.stringify(text, 2);
  write_results(json_path, text.str());
}

void write_results(const std::string& path, const std::string& text) {
  const auto folder = std::filesystem::path(path).parent_path();
  if (!folder.empty()) std::filesystem::create_directories(folder);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
  }
  std::filesystem::rename(tmp, path);
  std::printf("results written to %s\n", path.c_str());
}

}  // namespace acc::bench
