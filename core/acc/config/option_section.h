#pragma once
// Option sections a plugin owns. A strategy plugin declares its section (say `diloco_config:`)
// as data: each key's name, type, default, allowed values or range, one line of help and the
// question `accelerate config` asks. acc::Config then reads, checks, writes and asks those keys
// exactly as it does its own, without knowing what they mean; the plugin reads the values back
// through Config::section(name).
//
//   | piece                 | what it is                                                     |
//   |-----------------------|----------------------------------------------------------------|
//   | OptionSpec            | one key: type, default, what is allowed, help, question        |
//   | OptionSection         | a plugin's section: its keys, the strategies it configures     |
//   | OptionValues          | one section's values in a Config, each checked when set        |
//   | OptionSectionSource   | where Config looks up a section by name (the plugin registry)  |
//
// Values are kept as a file spells them ("8", "0.7", "true", "[2, 2]"), in canonical form, so a
// Config written and read again compares equal.
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace acc {

enum class OptionType { boolean, integer, number, text, choice, integer_list, text_list };
std::string to_string(OptionType type);  // "an integer", "true or false", ...: for messages

// Every member of OptionSpec and OptionSection has a default, so a plugin declares them with
// designated initializers naming only what it sets.
struct OptionSpec {
  std::string key{};  // within its section: "inner_steps"
  OptionType type = OptionType::text;
  std::string default_value{};       // as a file spells it: "8", "0.7", "NESTEROV", "[2, 2]"
  std::vector<std::string> allowed{};  // choice: the names allowed (matched without case)
  double min = -std::numeric_limits<double>::infinity();  // integer, number: the range allowed
  double max = std::numeric_limits<double>::infinity();
  std::string help{};      // one line, for `accelerate env` and error messages
  std::string question{};  // what `accelerate config` asks; empty: not asked

  // `text` in canonical form, or an acc::Error naming `full_key` ("diloco_config.inner_steps"),
  // the value and what is allowed.
  std::string checked(const std::string& text, const std::string& full_key) const;
};

class OptionValues;

struct OptionSection {
  std::string name{};                     // the file's key: "diloco_config"
  std::vector<std::string> strategies{};  // strategies it configures: asked when one is chosen
  std::vector<OptionSpec> options{};
  // Checks across keys, after each key was checked alone; throws acc::Error naming the keys.
  std::function<void(const OptionValues&)> check{};

  const OptionSpec* find(const std::string& key) const;  // null when it has no such key
};

// One section's values: the defaults until a key is set.
class OptionValues {
 public:
  OptionValues() = default;
  explicit OptionValues(std::shared_ptr<const OptionSection> section);

  const OptionSection& section() const;
  // Sets `key` from text as a file spells it; an unknown key or a bad value is an error naming
  // the section, the key and what is allowed.
  void set(const std::string& key, const std::string& text);
  // The value (set, else the default), as a file spells it.
  const std::string& text(const std::string& key) const;
  bool boolean(const std::string& key) const;
  int64_t integer(const std::string& key) const;
  double number(const std::string& key) const;
  std::vector<int64_t> integers(const std::string& key) const;
  std::vector<std::string> texts(const std::string& key) const;
  // Runs the section's check across keys.
  void validate() const;

  // Equal when they belong to sections of the same name and hold the same values.
  bool operator==(const OptionValues& other) const;

 private:
  const OptionSpec& spec(const std::string& key) const;
  std::shared_ptr<const OptionSection> section_;
  std::map<std::string, std::string> values_;  // every key of the section
};

// Where Config finds a section it has no built-in reader for. The plugin registry is the one
// source (it installs itself when libacc loads); a lookup of a name it does not know loads the
// plugins of its search folders first.
class OptionSectionSource {
 public:
  virtual ~OptionSectionSource() = default;
  virtual std::shared_ptr<const OptionSection> find_section(const std::string& name) = 0;
  // Every section of every plugin in the search folders (loading them first).
  virtual std::vector<std::shared_ptr<const OptionSection>> sections() = 0;
};
void set_option_section_source(OptionSectionSource* source);
OptionSectionSource* option_section_source();  // null when none is installed

}  // namespace acc
