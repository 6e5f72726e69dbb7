#include "config_command.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <thread>

#include <yaml-cpp/yaml.h>

#include "acc/accelerate/accelerate.h"
#include "acc/io/atomic_file.h"
#include "acc/kernels/matmul.h"
#include "acc/util/error.h"
#include "acc/util/strings.h"

namespace acc::cli {

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// One question at a time: the answer (or the default for an empty line) goes through `accept`,
// which throws acc::Error for a bad one; then the question is asked again. Without an input
// stream every question takes its default, unasked (accelerate config --default).
class Dialogue {
 public:
  Dialogue(std::istream* in, std::ostream& out) : in_(in), out_(out) {}

  template <class T>
  T ask(const std::string& question, const std::string& fallback,
        const std::function<T(const std::string&)>& accept) {
    if (!in_) return accept(fallback);
    for (;;) {
      out_ << question << " [" << fallback << "]: " << std::flush;
      std::string line;
      ACC_CHECK(static_cast<bool>(std::getline(*in_, line)), "accelerate config: no answer to \"",
                question, "\" (the input ended)");
      const std::string answer = util::trim(line).empty() ? fallback : util::trim(line);
      try {
        return accept(answer);
      } catch (const Error& e) {
        out_ << "  " << e.what() << "\n";
      }
    }
  }

  bool yes_no(const std::string& question, bool fallback) {
    return ask<bool>(question + " (yes/no)", fallback ? "yes" : "no", [](const std::string& a) {
      const std::string v = lower(a);
      if (v == "yes" || v == "y" || v == "true") return true;
      if (v == "no" || v == "n" || v == "false") return false;
      ACC_FAIL("bad answer '", a, "': allowed: yes, no");
    });
  }

  int count(const std::string& question, int fallback, int min) {
    return ask<int>(question, std::to_string(fallback), [min](const std::string& a) {
      const auto n = util::parse_int(a);
      ACC_CHECK(n && *n >= min, "bad answer '", a, "': expected a whole number >= ", min);
      return *n;
    });
  }

  // A config key's value, as a file spells it: Config::set judges it.
  void key(Config& c, const std::string& question, const std::string& key, const std::string& fallback) {
    ask<bool>(question, fallback, [&](const std::string& a) {
      c.set(key, a);
      return true;
    });
  }

 private:
  std::istream* in_;
  std::ostream& out_;
};

void write_text(const std::string& text, const std::string& path) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  io::write_file_atomically(p, [&](std::ostream& out) { out << text; });
}

void write_config(const Config& c, const std::string& path) { write_text(c.to_yaml(), path); }

// The lines of `text`, each with its end of line.
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line + "\n");
  return lines;
}

// "key:" at the start of a line (after `indent` spaces): the key, else empty.
std::string key_at(const std::string& line, size_t indent) {
  if (line.size() <= indent || line.compare(0, indent, std::string(indent, ' ')) != 0) return "";
  const std::string rest = line.substr(indent);
  if (rest.empty() || rest[0] == ' ' || rest[0] == '#' || rest[0] == '-') return "";
  const auto colon = rest.find(':');
  return colon == std::string::npos ? "" : rest.substr(0, colon);
}

}  // namespace

std::string add_missing_keys(const std::string& text, const std::string& full) {
  const YAML::Node have = YAML::Load(text);
  std::vector<std::string> out = lines_of(text);
  if (!out.empty() && out.back().back() != '\n') out.back() += "\n";
  std::string appended;
  const auto full_lines = lines_of(full);
  for (size_t i = 0; i < full_lines.size(); ++i) {
    const std::string key = key_at(full_lines[i], 0);
    if (key.empty()) continue;
    size_t end = i + 1;  // the key's block: it and its indented lines
    while (end < full_lines.size() && key_at(full_lines[end], 0).empty()) ++end;
    if (!have[key]) {  // a whole key (or section) the file lacks
      for (size_t j = i; j < end; ++j) appended += full_lines[j];
    } else if (have[key].IsMap()) {
      // Section keys the file lacks go after the section's last line in the file.
      std::string missing;
      for (size_t j = i + 1; j < end; ++j) {
        const std::string sub = key_at(full_lines[j], 2);
        if (!sub.empty() && !have[key][sub]) missing += full_lines[j];
      }
      if (!missing.empty()) {
        size_t at = 0;
        while (at < out.size() && key_at(out[at], 0) != key) ++at;
        size_t last = at;
        for (size_t j = at + 1; j < out.size() && key_at(out[j], 0).empty(); ++j)
          if (!util::trim(out[j]).empty() && util::trim(out[j])[0] != '#') last = j;
        out.insert(out.begin() + static_cast<std::ptrdiff_t>(last + 1), missing);
      }
    }
    i = end - 1;
  }
  std::string result;
  for (const auto& line : out) result += line;
  return result + appended;
}

namespace {

// --config_file F, or the default path.
std::string config_path(const std::vector<std::string>& args, size_t from) {
  for (size_t i = from; i < args.size(); ++i) {
    if (args[i] == "--config_file") {
      ACC_CHECK(i + 1 < args.size(), "--config_file needs a value");
      return args[i + 1];
    }
    if (args[i].rfind("--config_file=", 0) == 0) return args[i].substr(14);
    if (args[i].rfind("--", 0) != 0) return args[i];  // `config show F`
  }
  return Config::default_path();
}

constexpr const char* kUsage = R"(usage: accelerate config [--config_file F]          answer questions (stdin, line by line)
       accelerate config --default [--config_file F] no questions: this machine's defaults
       accelerate config show [F]                    print the config launch would use
       accelerate config validate F                  every problem, one per line; exit 1 if any
       accelerate config update [F]                  add keys this acc knows, keep the values
F defaults to )";

// What the distributed type question offers: NO, the distributed types the plugins' sections
// own (FSDP, SPMD), then the plugins' own strategies (DILOCO), which `strategy:` names.
struct Offered {
  std::vector<std::string> types{"NO"}, strategies;
};

Offered offered() {
  Offered o;
  auto add = [](std::vector<std::string>& to, const std::string& name) {
    if (!name.empty() && std::find(to.begin(), to.end(), name) == to.end()) to.push_back(name);
  };
  for (const auto& section : all_option_sections()) {
    add(o.types, section->distributed_type);
    for (const auto& name : section->strategies) add(o.strategies, name);
  }
  return o;
}

void ask_distributed_type(Dialogue& d, Config& c) {
  const Offered o = offered();
  std::string question = "Distributed type: " + util::join(o.types);
  for (const auto& name : o.strategies) question += ", " + name;
  question += o.strategies.empty() ? "?" : " (a plugin's strategy)?";
  // With several processes the first sharded type (FSDP's, when its plugin is there).
  const std::string fallback = c.dist.num_processes > 1 && o.types.size() > 1 ? o.types[1] : "NO";
  d.ask<bool>(question, fallback, [&](const std::string& a) {
    for (const auto& name : o.strategies)
      if (lower(a) == lower(name)) {
        c.dist.strategy = name;
        return true;
      }
    try {
      c.set("distributed_type", a);
    } catch (const Error&) {
      ACC_FAIL("bad answer '", a, "': allowed: ", util::join(o.types), o.strategies.empty() ? "" : ", ",
               util::join(o.strategies));
    }
    return true;
  });
}

// Asked yes or no: a boolean key, or one whose default is true or false (FSDP's activation
// checkpointing, which also takes classes).
bool asked_yes_no(const OptionSpec& spec) {
  return spec.type == OptionType::boolean || (spec.type == OptionType::custom && boolean_of(spec.default_value));
}

// The questions of every section that configures the chosen distributed type or strategy, in
// the order the section declares its keys, each when its ask_when allows given the answers so far.
void ask_sections(Dialogue& d, Config& c) {
  for (const auto& section : all_option_sections()) {
    const bool for_type = !section->distributed_type.empty() && c.dist.strategy.empty() &&
                          section->distributed_type == to_string(c.dist.distributed_type);
    const bool for_strategy = !c.dist.strategy.empty() && std::find(section->strategies.begin(),
                                                                    section->strategies.end(),
                                                                    c.dist.strategy) != section->strategies.end();
    if (!for_type && !for_strategy) continue;
    if (!section->in_config_fields()) c.section(section->name);  // written with its defaults even where nothing is asked
    for (const auto& spec : section->options) {
      if (spec.question.empty() || (spec.ask_when && !spec.ask_when(c))) continue;
      const std::string key = section->name + "." + spec.key;
      const std::string offer = spec.suggest ? spec.suggest(c) : spec.default_value;
      if (asked_yes_no(spec))
        c.set(key, d.yes_no(spec.question, boolean_of(offer).value_or(false)) ? "true" : "false");
      else
        d.key(c, spec.question, key, offer);
    }
  }
}

// The questions, in order: the processes, the distributed type, the questions of the sections
// that configure it (the plugins'), then mixed precision.
Config configure(Dialogue& d, std::ostream& out, const Machine& m) {
  Config c;
  out << "acc: " << m.cores << " cores, " << (m.native_bf16 ? "native bf16" : "no native bf16")
      << ". Press Enter to take the default in brackets.\n";
  c.dist.num_processes = d.count("How many processes (ranks) on this machine?", m.cores, 1);
  ask_distributed_type(d, c);
  ask_sections(d, c);
  const std::string hint = m.native_bf16 ? "bf16 recommended: this CPU multiplies bf16 natively"
                                         : "this CPU has no native bf16: bf16 would be emulated, slower";
  std::string question = "Mixed precision: no or bf16 (";
  question += hint;
  question += ")?";
  d.key(c, question, "mixed_precision", m.native_bf16 ? "bf16" : "no");
  c.validate();
  return c;
}

}  // namespace

Machine this_machine() {
  return {static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), kernels::has_native_bf16()};
}

Config default_config(const Machine& m) {
  std::ostringstream unasked;
  Dialogue d(nullptr, unasked);
  return configure(d, unasked, m);
}

Config ask_config(std::istream& in, std::ostream& out, const Machine& m) {
  Dialogue d(&in, out);
  return configure(d, out, m);
}

ConfigCheck check_config(const std::string& path) {
  ConfigCheck check;
  try {
    const Config c = Config::parse_file(path);  // not from_file: it would log the notes too
    for (const auto& w : c.warnings) check.notes.push_back(path + ": warning: " + w);
    if (!c.not_applicable_keys.empty()) check.notes.push_back(path + ": " + c.not_applicable_note());
    try {
      check_launchable(c);
    } catch (const Error& e) {  // the file read well, its values do not go together
      check.problems.push_back(path + ": " + e.what());
    }
  } catch (const Error& e) {  // parse_file's errors name the file
    check.problems.push_back(e.what());
  }
  return check;
}

int run_config(const std::vector<std::string>& args) {
  const std::string sub = args.empty() ? "" : args[0];
  if (sub == "--help" || sub == "-h") {
    std::cout << kUsage << Config::default_path() << "\n";
    return 0;
  }
  if (sub == "show") {
    const std::string path = config_path(args, 1);
    ACC_CHECK(std::filesystem::is_regular_file(path), "no config at ", path, " (run `accelerate config`)");
    std::cout << "# " << path << "\n" << Config::from_file(path).to_yaml();
    return 0;
  }
  if (sub == "validate") {
    ACC_CHECK(args.size() == 2, "usage: accelerate config validate FILE");
    // Valid exactly when accelerate launch would run with it: warnings are shown, not failed.
    const ConfigCheck check = check_config(args[1]);
    for (const auto& line : check.notes) std::cout << line << "\n";
    for (const auto& p : check.problems) std::cout << p << "\n";
    if (check.problems.empty()) std::cout << args[1] << ": valid\n";
    return check.problems.empty() ? 0 : 1;
  }
  if (sub == "update") {
    const std::string path = config_path(args, 1);
    const Config c = Config::from_file(path);
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string updated = add_missing_keys(text, c.to_yaml());
    const Config reread = Config::from_yaml(updated, path);
    ACC_CHECK(reread.dist == c.dist && reread.compute == c.compute, "config update: adding the missing keys to ",
              path, " would change its meaning; file left as it was");
    write_text(updated, path);
    std::cout << "updated " << path << " (keys this acc knows added; your lines and comments kept)\n";
    return 0;
  }
  const std::string path = config_path(args, 0);
  const bool defaults = std::find(args.begin(), args.end(), "--default") != args.end();
  for (const auto& a : args)
    ACC_CHECK(a == "--default" || a == "--config_file" || a == path || a.rfind("--config_file=", 0) == 0,
              "unknown argument '", a, "'\n", kUsage, Config::default_path());
  const Config c = defaults ? default_config(this_machine()) : ask_config(std::cin, std::cout, this_machine());
  write_config(c, path);
  std::cout << "accelerate configuration saved at " << path << "\n";
  return 0;
}

}  // namespace acc::cli
