// accelerate <command> [args...]: the command-line entry of acc.
#include <cstring>
#include <iostream>

#include "acc/util/error.h"
#include "commands.h"

namespace {

int usage(std::ostream& os, int code) {
  os << "usage: accelerate <command> [args...]\n\ncommands:\n";
  for (const auto& c : acc::cli::commands()) os << "  " << c.name << "\t" << c.summary << "\n";
  os << "\nrun 'accelerate <command> --help' for a command's options\n";
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return usage(std::cerr, 2);
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") return usage(std::cout, 0);
  for (const auto& command : acc::cli::commands()) {
    if (name != command.name) continue;
    try {
      return command.run(std::vector<std::string>(argv + 2, argv + argc));
    } catch (const acc::Error& e) {
      std::cerr << "accelerate " << name << ": error: " << e.what() << "\n";
      return 2;
    }
  }
  std::cerr << "accelerate: unknown command '" << name << "'\n\n";
  return usage(std::cerr, 2);
}
