#pragma once
// Option specs bound to a typed section of acc::Config (config.dist.fsdp, config.dist.spmd): how
// the built-in plugins declare keys whose values live in the fields a user program sets in C++
// (option_section.h, OptionSpec::store and load). bind(spec, &DistConfig::fsdp,
// &FsdpConfig::size) stores the key's checked text into that field and loads it back; a key
// with its own rules (an enum, a key written only when set) replaces store or load after.
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "acc/config/config.h"
#include "acc/config/option_section.h"

namespace acc::parallel {

// OptionSpec::suggest for an answer that does not depend on the answers before it.
inline std::function<std::string(const Config&)> offer(std::string answer) {
  return [answer = std::move(answer)](const Config&) { return answer; };
}

template <class Section, class T>
OptionSpec bind(OptionSpec spec, Section DistConfig::*section, T Section::*member) {
  spec.store = [section, member](Config& c, const std::string& text, const std::string&) {
    T& field = c.dist.*section.*member;
    if constexpr (std::is_same_v<T, bool>) {
      field = boolean_of(text).value_or(false);
    } else if constexpr (std::is_integral_v<T>) {
      field = text.empty() ? T{} : static_cast<T>(std::stoll(text));
    } else if constexpr (std::is_floating_point_v<T>) {
      field = text.empty() ? T{} : static_cast<T>(std::stod(text));
    } else if constexpr (std::is_same_v<T, std::string>) {
      field = text;
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      field = names_of(text);
    } else {
      static_assert(std::is_same_v<T, std::vector<int>>, "bind: a field type without a text form");
      field.clear();
      for (const auto& n : names_of(text)) field.push_back(std::stoi(n));
    }
  };
  spec.load = [section, member](const Config& c) -> std::optional<std::string> {
    const T& field = c.dist.*section.*member;
    if constexpr (std::is_same_v<T, bool>) {
      return field ? "true" : "false";
    } else if constexpr (std::is_integral_v<T>) {
      return std::to_string(field);
    } else if constexpr (std::is_floating_point_v<T>) {  // in the number type's canonical form
      char text[32];
      std::snprintf(text, sizeof text, "%.17g", static_cast<double>(field));
      return OptionSpec{.type = OptionType::number}.checked(text, "");
    } else if constexpr (std::is_same_v<T, std::string>) {
      return field;
    } else {
      return list_text(field);
    }
  };
  return spec;
}

}  // namespace acc::parallel
