// Plugin-owned option sections: checking a value against its spec, and one section's values.
#include "acc/config/option_section.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "acc/util/error.h"
#include "acc/util/strings.h"

namespace acc {
namespace {

// The shortest decimal that reads back as `value`.
std::string shortest(double value) {
  if (value == std::floor(value) && std::abs(value) < 1e15) return std::to_string(static_cast<int64_t>(value));
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*g", digits, value);
    if (std::strtod(buf, nullptr) == value) break;
  }
  return buf;
}

std::string range_text(const OptionSpec& s) {
  std::string out;
  if (s.min > -std::numeric_limits<double>::infinity()) out += " >= " + shortest(s.min);
  if (s.max < std::numeric_limits<double>::infinity()) out += (out.empty() ? " <= " : " and <= ") + shortest(s.max);
  return out;
}

// A value as messages show it.
std::string shown(const YAML::Node& node, const std::string& text) {
  if (node.IsSequence()) return "<a list>";
  if (node.IsMap()) return "<a mapping>";
  return text;
}

YAML::Node parsed(const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception&) {
    return YAML::Node(text);  // not YAML on its own: the text as a string
  }
}

}  // namespace

std::string to_string(OptionType type) {
  switch (type) {
    case OptionType::boolean: return "true or false";
    case OptionType::integer: return "an integer";
    case OptionType::number: return "a number";
    case OptionType::text: return "a string";
    case OptionType::choice: return "one of the names";
    case OptionType::integer_list: return "a list of integers";
    case OptionType::text_list: return "a list of strings";
    case OptionType::name_list: return "names: a list, or one string separated by commas";
    case OptionType::size: return "a size such as 8GiB";
    case OptionType::custom: return "a value (see the key's help)";
  }
  return "a value";
}

std::string OptionSpec::checked(const std::string& text, const std::string& full_key) const {
  const YAML::Node node = parsed(text);
  auto fail = [&](const std::string& expected) -> std::string {
    ACC_FAIL(full_key, ": bad value '", text, "' (expected ", expected, ")");
  };
  auto in_range = [&](double v, const std::string& what) {
    if (v < min || v > max) fail(what + range_text(*this));
  };
  switch (type) {
    case OptionType::boolean: {
      bool v = false;
      if (!node.IsScalar() || !YAML::convert<bool>::decode(node, v)) fail("true or false");
      return v ? "true" : "false";
    }
    case OptionType::integer: {
      int64_t v = 0;
      if (!node.IsScalar() || !YAML::convert<int64_t>::decode(node, v)) fail("an integer" + range_text(*this));
      in_range(static_cast<double>(v), "an integer");
      return std::to_string(v);
    }
    case OptionType::number: {
      double v = 0;
      if (!node.IsScalar() || !YAML::convert<double>::decode(node, v) || v != v)
        fail("a number" + range_text(*this));
      in_range(v, "a number");
      return shortest(v);
    }
    case OptionType::text:  // as YAML reads it: '"a b"' is a b, '""' and '~' nothing
      if (!node.IsNull() && !node.IsScalar()) fail("a string");
      return node.IsScalar() ? node.Scalar() : "";
    case OptionType::choice: {
      if (!node.IsNull() && !node.IsScalar()) ACC_FAIL(full_key, ": bad value '", shown(node, text), "' (expected a name)");
      const auto it = std::ranges::find(allowed, util::upper(util::trim(text)), [](const std::string& a) { return util::upper(a); });
      if (it == allowed.end()) ACC_FAIL(full_key, ": bad value '", text, "' (allowed: ", util::join(allowed), ")");
      return *it;
    }
    case OptionType::integer_list:
    case OptionType::text_list: {
      const bool integers = type == OptionType::integer_list;
      const std::string each = integers ? "an integer" : "a string";
      if (!node.IsSequence()) fail("a list, each " + each);
      std::vector<std::string> items;
      for (const auto& item : node) {
        int64_t v = 0;
        if (!item.IsScalar() || (integers && !YAML::convert<int64_t>::decode(item, v)))
          ACC_FAIL(full_key, ": bad value '", item.IsScalar() ? item.Scalar() : shown(item, ""), "' (expected ", each,
                   "); ", full_key, " is a list, each ", each);
        if (integers) in_range(static_cast<double>(v), "a list, each an integer");
        items.push_back(integers ? std::to_string(v) : item.Scalar());
      }
      return list_text(items);
    }
    case OptionType::name_list: {
      std::vector<std::string> names;
      if (node.IsSequence()) {
        for (const auto& item : node) {
          if (!item.IsScalar()) fail("a list of names, or names separated by commas");
          names.push_back(item.Scalar());
        }
      } else if (node.IsNull() || node.IsScalar()) {
        std::istringstream in(node.IsNull() ? "" : node.Scalar());
        for (std::string name; std::getline(in, name, ',');)
          if (!util::trim(name).empty()) names.push_back(util::trim(name));
      } else {
        fail("a list of names, or names separated by commas");
      }
      return list_text(names);
    }
    case OptionType::size: {
      if (node.IsNull()) return "";  // no size given
      const auto bytes = node.IsScalar() ? util::parse_bytes(node.Scalar()) : std::nullopt;
      if (!bytes) fail("a size such as 8GiB, 512MB or a number of bytes");
      return std::to_string(*bytes);
    }
    case OptionType::custom:
      return text;
  }
  ACC_FAIL(full_key, ": unknown option type ", static_cast<int>(type));
}

bool OptionSpec::answers_to(const std::string& name) const {
  return name == key || std::ranges::find(aliases, name) != aliases.end();
}

const OptionSpec* OptionSection::find(const std::string& key) const {
  const auto it = std::ranges::find_if(options, [&](const OptionSpec& s) { return s.answers_to(key); });
  return it == options.end() ? nullptr : &*it;
}

void OptionSection::fail_unknown_key(const std::string& key) const {
  std::vector<std::string> known;
  for (const auto& s : options) known.push_back(s.key);
  ACC_FAIL("unknown key '", name, ".", key, "' (known ", name, " keys: ", util::join(known), ")");
}

bool OptionSection::in_config_fields() const {
  return !options.empty() && std::ranges::all_of(options, [](const OptionSpec& s) { return s.store && s.load; });
}

std::vector<std::string> names_of(const std::string& text) {
  const YAML::Node node = parsed(text);
  return node.IsSequence() ? node.as<std::vector<std::string>>() : std::vector<std::string>{};
}

std::optional<bool> boolean_of(const std::string& text) {
  bool v = false;
  const YAML::Node node = parsed(text);
  if (!node.IsScalar() || !YAML::convert<bool>::decode(node, v)) return std::nullopt;
  return v;
}

OptionValues::OptionValues(std::shared_ptr<const OptionSection> section) : section_(std::move(section)) {
  ACC_CHECK(section_, "OptionValues: no section");
  for (const auto& spec : section_->options)
    values_[spec.key] = spec.checked(spec.default_value, section_->name + "." + spec.key + " (its default)");
}

const OptionSection& OptionValues::section() const {
  ACC_CHECK(section_, "OptionValues: empty (made without a section)");
  return *section_;
}

const OptionSpec& OptionValues::spec(const std::string& key) const {
  const OptionSpec* spec = section().find(key);
  if (!spec) section_->fail_unknown_key(key);
  return *spec;
}

void OptionValues::set(const std::string& key, const std::string& text) {
  const OptionSpec& s = spec(key);
  values_[s.key] = s.checked(text, section().name + "." + key);
}

const std::string& OptionValues::text(const std::string& key) const {
  return values_.at(spec(key).key);
}

bool OptionValues::boolean(const std::string& key) const { return parsed(text(key)).as<bool>(); }
int64_t OptionValues::integer(const std::string& key) const { return parsed(text(key)).as<int64_t>(); }
double OptionValues::number(const std::string& key) const { return parsed(text(key)).as<double>(); }
std::vector<int64_t> OptionValues::integers(const std::string& key) const {
  return parsed(text(key)).as<std::vector<int64_t>>();
}
std::vector<std::string> OptionValues::texts(const std::string& key) const {
  return parsed(text(key)).as<std::vector<std::string>>();
}

void OptionValues::validate() const {
  if (section().check) section().check(*this);
}

bool OptionValues::operator==(const OptionValues& other) const {
  const std::string mine = section_ ? section_->name : "", theirs = other.section_ ? other.section_->name : "";
  return mine == theirs && values_ == other.values_;
}

namespace {
OptionSectionSource* g_source = nullptr;
}

void set_option_section_source(OptionSectionSource* source) { g_source = source; }
OptionSectionSource* option_section_source() { return g_source; }

}  // namespace acc
