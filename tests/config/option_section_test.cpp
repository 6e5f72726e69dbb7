// Plugin-owned option sections: each type's checks and canonical form, and one section's values.
#include "acc/config/option_section.h"

#include <gtest/gtest.h>

#include "distributed/local/error_matchers.h"

namespace acc {
namespace {

std::shared_ptr<const OptionSection> section() {
  return std::make_shared<const OptionSection>(OptionSection{
      .name = "demo_config",
      .strategies = {"DEMO"},
      .options = {{.key = "steps", .type = OptionType::integer, .default_value = "4", .min = 1, .max = 100},
                  {.key = "rate", .type = OptionType::number, .default_value = "0.5", .min = 0},
                  {.key = "on", .type = OptionType::boolean, .default_value = "yes"},
                  {.key = "name", .type = OptionType::text},
                  {.key = "mode", .type = OptionType::choice, .default_value = "fast", .allowed = {"FAST", "EXACT"}},
                  {.key = "shape", .type = OptionType::integer_list, .default_value = "[2, 2]"},
                  {.key = "axes", .type = OptionType::text_list, .default_value = "[]"}},
      .check = [](const OptionValues& v) { ACC_CHECK(v.integer("steps") % 2 == 0, "demo_config.steps: must be even"); },
  });
}

TEST(OptionSection, DefaultsAreCheckedAndCanonical) {
  const OptionValues v(section());
  EXPECT_EQ(v.integer("steps"), 4);
  EXPECT_EQ(v.number("rate"), 0.5);
  EXPECT_EQ(v.text("on"), "true");  // "yes" is YAML's true
  EXPECT_EQ(v.text("name"), "");
  EXPECT_EQ(v.text("mode"), "FAST");  // the spelling of `allowed`
  EXPECT_EQ(v.integers("shape"), (std::vector<int64_t>{2, 2}));
  EXPECT_TRUE(v.texts("axes").empty());
}

TEST(OptionSection, ValuesAreCheckedWhenSet) {
  OptionValues v(section());
  v.set("rate", "0.1");
  EXPECT_EQ(v.text("rate"), "0.1");  // the shortest text that reads back
  v.set("shape", "[4,1]");
  EXPECT_EQ(v.text("shape"), "[4, 1]");
  v.set("axes", "[fsdp, model]");
  EXPECT_EQ(v.texts("axes"), (std::vector<std::string>{"fsdp", "model"}));
  v.set("mode", "exact");
  EXPECT_EQ(v.text("mode"), "EXACT");
  EXPECT_ACC_ERROR(v.set("steps", "0"), {"demo_config.steps: bad value '0'", "an integer >= 1 and <= 100"});
  EXPECT_ACC_ERROR(v.set("steps", "2.5"), {"demo_config.steps", "an integer"});
  EXPECT_ACC_ERROR(v.set("rate", "-1"), {"demo_config.rate", "a number >= 0"});
  EXPECT_ACC_ERROR(v.set("on", "maybe"), {"demo_config.on", "true or false"});
  EXPECT_ACC_ERROR(v.set("mode", "slow"), {"demo_config.mode: bad value 'slow'", "allowed: FAST, EXACT"});
  EXPECT_ACC_ERROR(v.set("shape", "[2, x]"), {"demo_config.shape", "a list, each an integer"});
  EXPECT_ACC_ERROR(v.set("shape", "2"), {"demo_config.shape", "a list"});
  EXPECT_ACC_ERROR(v.set("stepz", "2"), {"unknown key 'demo_config.stepz'", "known demo_config keys: steps, rate"});
  EXPECT_EQ(v.integer("steps"), 4);  // a bad value leaves the old one
}

TEST(OptionSection, CheckAcrossKeysRunsInValidate) {
  OptionValues v(section());
  v.set("steps", "3");
  EXPECT_ACC_ERROR(v.validate(), {"demo_config.steps: must be even"});
  v.set("steps", "6");
  v.validate();
}

TEST(OptionSection, EqualWhenTheSameSectionHoldsTheSameValues) {
  OptionValues a(section()), b(section());
  EXPECT_EQ(a, b);
  b.set("steps", "8");
  EXPECT_FALSE(a == b);
  a.set("steps", "8");
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace acc
