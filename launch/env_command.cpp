#include "env_command.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>

#include "acc/config/config.h"
#include "acc/kernels/matmul.h"
#include "acc/plugin/registry.h"
#include "acc/util/strings.h"

namespace acc::cli {

namespace {

// The first line of /proc/<file> that starts with `key`, after the colon.
std::string proc_field(const char* file, const std::string& key) {
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) {
      const auto colon = line.find(':');
      return colon == std::string::npos ? "" : line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  return "unknown";
}

std::string cpu_features() {
  std::istringstream flags(proc_field("/proc/cpuinfo", "flags"));
  const std::set<std::string> present{std::istream_iterator<std::string>(flags), {}};
  std::string out;
  for (const char* f : {"avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"})
    if (present.count(f)) out += std::string(out.empty() ? "" : " ") + f;
  return out.empty() ? "none of avx2/avx512/amx" : out;
}

std::string first_line_of(const char* command) {
  std::string line;
  if (FILE* p = ::popen(command, "r")) {
    char buf[256];
    if (std::fgets(buf, sizeof buf, p)) line = buf;
    ::pclose(p);
  }
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  return line.empty() ? "not found" : line;
}

}  // namespace

int run_env(const std::vector<std::string>& args) {
  // --config_file F shows F, as Hugging Face's `accelerate env --config_file` does.
  const bool config_given = args.size() == 2 && args[0] == "--config_file";
  if (!args.empty() && !config_given) {
    std::cout << "usage: accelerate env [--config_file F]\n";
    if (args[0] == "--help" || args[0] == "-h") return 0;
    std::cerr << "accelerate env: unexpected '" << args[0] << "'\n";
    return 2;
  }
  std::cout << "- acc version: " << ACC_VERSION << "\n"
            << "- CPU: " << proc_field("/proc/cpuinfo", "model name") << "\n"
            << "- CPU features: " << cpu_features() << "\n"
            << "- cores: " << std::thread::hardware_concurrency() << "\n"
            << "- memory: " << proc_field("/proc/meminfo", "MemTotal") << "\n"
            << "- native bf16 products: " << (kernels::has_native_bf16() ? "yes" : "no (emulated)") << "\n"
            << "- " << kernels::onednn_description() << "\n"
            << "- MPI: " << first_line_of("mpirun --version 2>/dev/null") << "\n";
  auto& registry = plugin::Registry::global();
  std::cout << "- plugin folders:";
  for (const auto& f : registry.search_folders()) std::cout << " " << f;
  std::cout << "\n";
  registry.load_all();
  for (const auto& why : registry.load_failures()) std::cout << "- plugin failed to load: " << why << "\n";
  for (const auto& p : registry.loaded())
    std::cout << "- plugin " << p.name << ": " << p.path << " (plugin API version " << p.api_version << ")\n";
  std::cout << "- strategies:";
  for (const auto& n : registry.strategy_names()) std::cout << " " << n;
  std::cout << "\n- comm backends:";
  for (const auto& n : registry.comm_backend_names()) std::cout << " " << n;
  std::cout << "\n";
  for (const auto& section : registry.sections()) {
    const std::string serves = section->distributed_type.empty() ? "strategies: " + util::join(section->strategies)
                                                                 : "distributed_type " + section->distributed_type;
    std::cout << "- option section " << section->name << " (" << serves << "):\n";
    for (const auto& spec : section->options)
      std::cout << "    " << spec.key << ": " << spec.default_value << "  # " << spec.help << "\n";
  }
  const char* explicit_file = std::getenv("ACC_CONFIG_FILE");
  const std::string path = config_given                       ? args[1]
                           : explicit_file && *explicit_file ? explicit_file
                                                             : Config::default_path();
  if (std::filesystem::is_regular_file(path)) {
    std::cout << "- config (" << path << "):\n";
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) std::cout << "    " << line << "\n";
  } else {
    std::cout << "- config: none (" << path << " does not exist; run `accelerate config`)\n";
  }
  return 0;
}

}  // namespace acc::cli
