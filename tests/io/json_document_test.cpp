// io::JsonDocument against Poco's own JSON tree (the reference): the same values, kinds and
// member order for documents of nested arrays and objects; integers at the edges of int64 and
// uint64; repeated keys; and errors naming the text's source.
#include <gtest/gtest.h>

#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <random>
#include <sstream>
#include <string>

#include "acc/io/json_document.h"
#include "acc/util/error.h"

namespace {

using acc::io::JsonDocument;
using Kind = JsonDocument::Kind;

// A random value of nested objects and arrays, `depth` levels at most.
Poco::Dynamic::Var random_value(std::mt19937& gen, int depth) {
  const int pick = static_cast<int>(gen() % (depth > 0 ? 8 : 6));
  switch (pick) {
    case 0: return Poco::Dynamic::Var();
    case 1: return gen() % 2 == 0;
    case 2: return static_cast<Poco::Int64>(gen()) - (Poco::Int64{1} << 31);
    case 3: return static_cast<double>(gen() % 1000) / 8.0 + 0.125;
    case 4: {
      std::string s(gen() % 20, static_cast<char>('a' + gen() % 26));
      s += "\"\\";
      return s;
    }
    case 5: return static_cast<Poco::UInt64>(gen()) << 33;
    case 6: {
      Poco::JSON::Array::Ptr a = new Poco::JSON::Array;
      for (unsigned i = gen() % 5; i > 0; --i) a->add(random_value(gen, depth - 1));
      return a;
    }
    default: {
      Poco::JSON::Object::Ptr o = new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
      for (unsigned i = gen() % 5; i > 0; --i) {
        std::string key = "k";
        key += std::to_string(gen() % 100);
        o->set(key, random_value(gen, depth - 1));
      }
      return o;
    }
  }
}

// The document's value equals Poco's, recursively.
void expect_same(const JsonDocument::Value& mine, const Poco::Dynamic::Var& poco, const std::string& path) {
  if (poco.isEmpty()) {
    EXPECT_TRUE(mine.is_null()) << path;
  } else if (poco.type() == typeid(Poco::JSON::Object::Ptr)) {
    const auto o = poco.extract<Poco::JSON::Object::Ptr>();
    ASSERT_TRUE(mine.is_object()) << path;
    const auto members = mine.members();
    std::vector<std::string> names;
    o->getNames(names);
    ASSERT_EQ(members.size(), names.size()) << path;
    for (size_t i = 0; i < names.size(); ++i) {
      EXPECT_EQ(members[i].first, names[i]) << path;
      expect_same(members[i].second, o->get(names[i]), path + "." + names[i]);
      const auto found = mine.find(names[i]);
      ASSERT_TRUE(found.has_value()) << path;
      expect_same(*found, o->get(names[i]), path + "." + names[i] + " (found)");
    }
  } else if (poco.type() == typeid(Poco::JSON::Array::Ptr)) {
    const auto a = poco.extract<Poco::JSON::Array::Ptr>();
    ASSERT_TRUE(mine.is_array()) << path;
    const auto elements = mine.elements();
    ASSERT_EQ(elements.size(), a->size()) << path;
    for (size_t i = 0; i < elements.size(); ++i)
      expect_same(elements[i], a->get(static_cast<unsigned>(i)), path + "[" + std::to_string(i) + "]");
  } else if (poco.isBoolean()) {
    ASSERT_TRUE(mine.is_bool()) << path;
    EXPECT_EQ(mine.as_bool(), poco.convert<bool>()) << path;
  } else if (poco.isInteger()) {
    ASSERT_TRUE(mine.is_integer()) << path;
    if (poco.isSigned())
      EXPECT_EQ(mine.as_int64(), poco.convert<Poco::Int64>()) << path;
    else
      EXPECT_EQ(mine.as_uint64(), poco.convert<Poco::UInt64>()) << path;
  } else if (poco.isNumeric()) {
    ASSERT_EQ(mine.kind(), Kind::number) << path;
    std::ostringstream expected;
    expected << poco.convert<double>();
    EXPECT_EQ(mine.describe(), expected.str()) << path;
  } else {
    ASSERT_TRUE(mine.is_string()) << path;
    EXPECT_EQ(mine.as_string(), poco.convert<std::string>()) << path;
  }
}

TEST(JsonDocument, SameAsPocosTreeForRandomDocuments) {
  std::mt19937 gen(7);
  for (int trial = 0; trial < 200; ++trial) {
    Poco::JSON::Object::Ptr root = new Poco::JSON::Object(Poco::JSON_PRESERVE_KEY_ORDER);
    for (const char* name : {"m0", "m1", "m2", "m3"}) root->set(name, random_value(gen, 4));
    std::ostringstream text;
    root->stringify(text, trial % 2);
    const JsonDocument doc(text.str(), "trial");
    Poco::JSON::Parser parser(new Poco::JSON::ParseHandler(true));
    expect_same(doc.root(), parser.parse(text.str()), "trial " + std::to_string(trial));
    if (HasFatalFailure() || HasFailure()) FAIL() << text.str();
  }
}

TEST(JsonDocument, IntegersAtTheEdges) {
  const JsonDocument doc(R"({"max": 9223372036854775807, "min": -9223372036854775808,
                             "umax": 18446744073709551615, "zero": 0, "neg": -1, "real": 2.5})",
                         "edges");
  const auto v = [&](const char* key) { return *doc.root().find(key); };
  EXPECT_EQ(v("max").as_int64(), INT64_MAX);
  EXPECT_EQ(v("max").as_uint64(), uint64_t{INT64_MAX});
  EXPECT_EQ(v("min").as_int64(), INT64_MIN);
  EXPECT_EQ(v("min").as_uint64(), std::nullopt);
  EXPECT_EQ(v("umax").as_int64(), std::nullopt);  // does not fit
  EXPECT_EQ(v("umax").as_uint64(), UINT64_MAX);
  EXPECT_EQ(v("zero").as_uint64(), 0u);
  EXPECT_EQ(v("neg").as_int64(), -1);
  EXPECT_EQ(v("neg").describe(), "-1");
  EXPECT_EQ(v("real").as_int64(), std::nullopt);
  EXPECT_FALSE(v("real").is_integer());
}

TEST(JsonDocument, RepeatedKeysAndEmptyContainers) {
  const JsonDocument doc(R"({"a": 1, "b": {}, "a": 2, "c": []})", "repeated");
  const auto members = doc.root().members();
  ASSERT_EQ(members.size(), 4u);
  EXPECT_EQ(members[2].first, "a");
  EXPECT_EQ(doc.root().find("a")->as_int64(), 2);  // the last one, as Poco's tree keeps
  EXPECT_TRUE(doc.root().find("b")->members().empty());
  EXPECT_TRUE(doc.root().find("c")->elements().empty());
  EXPECT_FALSE(doc.root().find("d").has_value());
  EXPECT_FALSE(doc.root().find("c")->find("a").has_value());  // not an object
}

TEST(JsonDocument, EscapesAndEmptyStrings) {
  const JsonDocument doc(R"({"": "", "line": "a\nb\t\"c\"", "accent": "\u00e9", "clef": "\ud834\udd1e",
                             "small": 1e-7, "list": ["x", "", {"": 3}]})",
                         "escapes");
  const auto v = [&](const char* key) { return *doc.root().find(key); };
  EXPECT_EQ(v("").as_string(), "");
  EXPECT_EQ(v("line").as_string(), "a\nb\t\"c\"");
  EXPECT_EQ(v("accent").as_string(), "\xc3\xa9");          // UTF-8
  EXPECT_EQ(v("clef").as_string(), "\xf0\x9d\x84\x9e");  // a surrogate pair, as UTF-8
  EXPECT_EQ(v("small").describe(), "1e-07");
  EXPECT_EQ(v("line").describe(), "'a\nb\t\"c\"'");
  const auto list = v("list").elements();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[1].as_string(), "");
  EXPECT_EQ(list[2].find("")->as_int64(), 3);
}

TEST(JsonDocument, InvalidTextNamesItsSource) {
  for (const std::string text : {"", "{\"a\": ", "{\"a\" 1}", "[1, 2", "{} {}"}) {
    try {
      const JsonDocument doc(text, "some.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const acc::Error& e) {
      EXPECT_NE(std::string(e.what()).find("some.json: invalid JSON"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
