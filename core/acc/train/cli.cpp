#include "acc/train/cli.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "acc/runtime/init.h"
#include "acc/util/error.h"

namespace acc::train {

namespace {

// "--val-every" and "--val_every" are one option: names are compared with '-' read as '_'.
std::string canonical(std::string name) {
  std::ranges::replace(name, '-', '_');
  return name;
}

}  // namespace

Args::Args(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    ACC_CHECK(arg.starts_with("--") && arg.size() > 2, "unexpected argument '", arg,
              "' (options look like --name value)");
    arg = arg.substr(2);
    const auto eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    typed_[canonical(name)] = name;
    if (eq != std::string::npos) {
      values_[canonical(name)] = arg.substr(eq + 1);
    } else if (i + 1 < argc && !std::string(argv[i + 1]).starts_with("--")) {
      values_[canonical(name)] = argv[++i];
    } else {
      values_[canonical(name)] = "";
    }
  }
}

const std::string* Args::value(const std::string& key) {
  known_[canonical(key)] = key;
  const auto it = values_.find(canonical(key));
  return it == values_.end() ? nullptr : &it->second;
}

bool Args::has(const std::string& key) const { return values_.count(canonical(key)) > 0; }

std::string Args::get(const std::string& key, const std::string& fallback) {
  const std::string* it = value(key);
  if (!it) return fallback;
  ACC_CHECK(!it->empty(), "option --", key, " needs a value");
  return *it;
}

int64_t Args::get_int(const std::string& key, int64_t fallback) {
  const std::string v = get(key, std::to_string(fallback));
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  ACC_CHECK(end && *end == '\0', "option --", key, ": '", v, "' is not an integer");
  return n;
}

double Args::get_double(const std::string& key, double fallback) {
  const std::string v = get(key, std::to_string(fallback));
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  ACC_CHECK(end && *end == '\0', "option --", key, ": '", v, "' is not a number");
  return d;
}

std::optional<std::string> Args::get_optional(const std::string& key) {
  const std::string* it = value(key);
  return it ? std::optional<std::string>(*it) : std::nullopt;
}

bool Args::flag(const std::string& key) {
  const std::string* it = value(key);
  if (!it) return false;
  ACC_CHECK(it->empty(), "option --", key, " takes no value (got '", *it, "')");
  return true;
}

void Args::finish() const {
  for (const auto& [key, value] : values_) {
    if (known_.count(key)) continue;
    std::string list;
    for (const auto& [_, spelled] : known_) list += " --" + spelled;
    ACC_FAIL("unknown option --", typed_.at(key), " (known:", list, ")");
  }
}

int run_program(const std::string& program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s%s\n", program.c_str(), error_prefix(e), e.what());
    // The other ranks may be waiting in a collective with this one: end the job now rather
    // than leave them to their timeout.
    if (initialized() && world().size() > 1) {
      std::fflush(stderr);
      world().abort(1);
    }
    return 1;
  }
}

}  // namespace acc::train
