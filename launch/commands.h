#pragma once
// The subcommands of `accelerate`. A new subcommand (config, env, estimate-memory) is one new
// source file with its run function plus one line in commands.cpp.
#include <string>
#include <vector>

namespace acc::cli {

struct Command {
  const char* name;
  const char* summary;
  // Arguments after the subcommand name; returns the process exit code.
  int (*run)(const std::vector<std::string>& args);
};

const std::vector<Command>& commands();

// A whole number >= min given for option `name` ("--num_processes"); otherwise acc::Error naming
// the option, the value and what is expected.
int parse_count(const std::string& value, const std::string& name, int min);

}  // namespace acc::cli
