#pragma once
// Option sections a plugin owns. A strategy plugin declares its section (say `diloco_config:`)
// as data: each key's name, type, default, allowed values or range, one line of help and the
// question `accelerate config` asks. acc::Config then reads, checks, writes and asks those keys
// exactly as it does its own, without knowing what they mean; the plugin reads the values back
// through Config::section(name).
//
// A section may instead live in typed fields of acc::Config: the built-in plugins' sections
// (`fsdp_config:` in config.dist.fsdp, `spmd_config:` in config.dist.spmd), which user programs
// set in C++ as TorchAcc's do. Each of its keys then also says how its checked text is stored
// into those fields and read back (OptionSpec::store, load); Config keeps no values of its own
// for it, and the plugin still owns every key, check, question and the strategy it names.
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
#include <optional>
#include <string>
#include <vector>

#include "acc/util/strings.h"

namespace acc {

struct Config;

// name_list: a YAML list of names, or one string of names separated by commas ("A,B"), kept as
// "[A, B]". size: bytes, written "8GiB", "512MB", "1.5 GB" or a number, kept as the number.
// custom: any scalar or list, kept as written; the key's `store` checks it.
enum class OptionType { boolean, integer, number, text, choice, integer_list, text_list, name_list, size, custom };
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
  // Other names a file may use for the key (an older accelerate's).
  std::vector<std::string> aliases{};
  // `accelerate config`: the answer it offers (empty: default_value), and whether it asks at
  // all given the answers so far (empty: always).
  std::function<std::string(const Config&)> suggest{};
  std::function<bool(const Config&)> ask_when{};
  // A key of a section in typed fields of Config: `store` puts the checked text into them
  // (throwing acc::Error naming `full_key` for a value the type allows but the field does not),
  // `load` gives it back as a file spells it, or nothing when the file need not hold the key.
  std::function<void(Config& config, const std::string& text, const std::string& full_key)> store{};
  std::function<std::optional<std::string>(const Config& config)> load{};

  // `text` in canonical form, or an acc::Error naming `full_key` ("diloco_config.inner_steps"),
  // the value and what is allowed.
  std::string checked(const std::string& text, const std::string& full_key) const;
  bool answers_to(const std::string& name) const;  // its key or one of its aliases
};

class OptionValues;

struct OptionSection {
  std::string name{};                     // the file's key: "diloco_config"
  std::vector<std::string> strategies{};  // strategies it configures: asked when one is chosen
  // The value of Hugging Face accelerate's distributed_type it configures (FSDP, SPMD), which
  // `accelerate config` offers and then asks this section's questions for.
  std::string distributed_type{};
  std::vector<OptionSpec> options{};
  // Other sections the strategies of this one read too (SPMD: fsdp_config, for its units,
  // checkpointing and offload); keys of any other section are warned about as changing nothing.
  std::vector<std::string> also_reads{};
  // Checks across keys, after each key was checked alone; throws acc::Error naming the keys.
  std::function<void(const OptionValues&)> check{};
  // The same for a section in typed fields (every key has store and load): Config::validate.
  std::function<void(const Config&)> check_config{};
  // The registered strategy a config without `strategy:` runs when this section owns its
  // distributed_type (FSDP: the sharding strategy's name); empty when not this section's.
  std::function<std::optional<std::string>(const Config&)> strategy_of{};

  // What core asks the section of the strategy a config runs (Config::strategy_section), so
  // that it never reads a strategy's keys itself. Each is optional; unset, core takes the
  // answer in brackets.
  // Checkpoints hold whole tensors (Hugging Face's FULL_STATE_DICT), not each rank's pieces [no].
  std::function<bool(const Config&)> full_checkpoints{};
  // Models are built without parameter memory (nn::DeferredInit): the strategy makes each
  // rank's pieces itself [no].
  std::function<bool(const Config&)> deferred_init{};
  // Bytes one rank may use, the budget AUTO fits in; 0: the rank's share of the machine [0].
  std::function<int64_t(const Config&)> memory_limit{};
  // A few words on how the strategy lays the model out, for a run's first line [none].
  std::function<std::string(const Config&)> summary{};
  // What a training program whose model declares its blocks changes in the config it loaded
  // (FSDP: wrap those blocks when no wrap policy was chosen) [nothing].
  std::function<void(Config&)> program_defaults{};

  const OptionSpec* find(const std::string& key) const;  // by key or alias; null when none
  bool in_config_fields() const;  // every key has store and load
  // "unknown key 'NAME.key' (known NAME keys: ...)".
  [[noreturn]] void fail_unknown_key(const std::string& key) const;
};

// For a key's store: the names of a name_list's canonical text, and a boolean's value.
std::vector<std::string> names_of(const std::string& text);
std::optional<bool> boolean_of(const std::string& text);
// A list's canonical text, for a key's load: "[a, b]", "[2, 4]".
template <class Items>
std::string list_text(const Items& items) {
  std::string out = "[";  // built by appending: GCC 12 warns falsely on "[" + std::string
  out += util::join(items);
  return out += ']';
}

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
