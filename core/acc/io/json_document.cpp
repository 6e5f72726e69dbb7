#include "acc/io/json_document.h"

#include <Poco/Exception.h>
#include <Poco/JSON/Handler.h>
#include <Poco/JSON/Parser.h>

#include <cstring>
#include <limits>
#include <sstream>
#include <tuple>

#include "acc/util/error.h"

namespace acc::io {

// Poco's parser calls it value by value; it appends nodes to the document.
class JsonDocument::Builder : public Poco::JSON::Handler {
 public:
  Builder(JsonDocument& doc, const std::string& where) : doc_(doc), where_(where) {}

  void reset() override {
    doc_.nodes_.clear();
    doc_.chars_.clear();
    open_.clear();
    has_key_ = false;
  }
  void startObject() override { open_.push_back(add(JsonDocument::Kind::object, 0)); }
  void endObject() override { close(); }
  void startArray() override { open_.push_back(add(JsonDocument::Kind::array, 0)); }
  void endArray() override { close(); }
  void key(const std::string& k) override {
    key_ = place(k);
    has_key_ = true;
  }
  void null() override { add(JsonDocument::Kind::null, 0); }
  void value(int v) override { integer(v < 0, static_cast<uint64_t>(static_cast<int64_t>(v))); }
  void value(unsigned v) override { integer(false, v); }
  void value(Poco::Int64 v) override { integer(v < 0, static_cast<uint64_t>(v)); }
  void value(Poco::UInt64 v) override { integer(false, v); }
  void value(const std::string& v) override {
    const auto [at, size] = place(v);
    add(JsonDocument::Kind::string, (uint64_t{at} << 32) | size);
  }
  void value(double d) override {
    uint64_t bits;
    std::memcpy(&bits, &d, sizeof bits);
    add(JsonDocument::Kind::number, bits);
  }
  void value(bool b) override { add(JsonDocument::Kind::boolean, b ? 1 : 0); }

 private:
  uint32_t add(JsonDocument::Kind kind, uint64_t bits) {
    ACC_CHECK(doc_.nodes_.size() < std::numeric_limits<uint32_t>::max(), where_, ": over 2^32 JSON values");
    JsonDocument::Node n;
    n.kind = kind;
    n.bits = bits;
    if (has_key_) std::tie(n.key_at, n.key_size) = key_;
    has_key_ = false;
    const auto at = static_cast<uint32_t>(doc_.nodes_.size());
    n.end = at + 1;
    doc_.nodes_.push_back(n);
    return at;
  }
  void integer(bool negative, uint64_t bits) {
    doc_.nodes_[add(JsonDocument::Kind::integer, bits)].negative = negative;
  }
  void close() {
    doc_.nodes_[open_.back()].end = static_cast<uint32_t>(doc_.nodes_.size());
    open_.pop_back();
  }
  std::pair<uint32_t, uint32_t> place(const std::string& s) {
    ACC_CHECK(doc_.chars_.size() + s.size() < std::numeric_limits<uint32_t>::max(), where_,
              ": over 2^32 bytes of JSON strings");
    const auto at = static_cast<uint32_t>(doc_.chars_.size());
    doc_.chars_ += s;
    return {at, static_cast<uint32_t>(s.size())};
  }

  JsonDocument& doc_;
  const std::string& where_;
  std::vector<uint32_t> open_;  // the containers not yet closed
  std::pair<uint32_t, uint32_t> key_;
  bool has_key_ = false;
};

JsonDocument::JsonDocument(const std::string& text, const std::string& where) {
  // About one value per 6 characters (a safetensors header has one per 7, a manifest one per
  // 16; a denser text grows the array) and fewer characters kept than read: one allocation each.
  nodes_.reserve(text.size() / 6 + 1);
  chars_.reserve(text.size());
  try {
    Poco::JSON::Parser parser(new Builder(*this, where));
    parser.parse(text);
  } catch (const Poco::Exception& e) {
    ACC_FAIL(where, ": invalid JSON (", e.displayText(), ")");
  }
  ACC_CHECK(!nodes_.empty(), where, ": invalid JSON (no value)");
}

bool JsonDocument::Value::as_bool() const { return is_bool() && node().bits != 0; }

std::optional<int64_t> JsonDocument::Value::as_int64() const {
  if (!is_integer() || (!node().negative && node().bits > uint64_t{std::numeric_limits<int64_t>::max()}))
    return std::nullopt;
  return static_cast<int64_t>(node().bits);
}

std::optional<uint64_t> JsonDocument::Value::as_uint64() const {
  if (!is_integer() || node().negative) return std::nullopt;
  return node().bits;
}

std::string_view JsonDocument::Value::as_string() const {
  if (!is_string()) return {};
  return std::string_view(doc_->chars_).substr(node().bits >> 32, node().bits & 0xffffffffu);
}

std::string JsonDocument::Value::describe() const {
  switch (kind()) {
    case Kind::null: return "null";
    case Kind::boolean: return as_bool() ? "true" : "false";
    case Kind::integer:
      return node().negative ? std::to_string(static_cast<int64_t>(node().bits)) : std::to_string(node().bits);
    case Kind::number: {
      double d;
      std::memcpy(&d, &node().bits, sizeof d);
      std::ostringstream out;
      out << d;
      return out.str();
    }
    case Kind::string: {
      std::string quoted = "'";
      quoted.append(as_string()).push_back('\'');
      return quoted;
    }
    case Kind::array: return "an array";
    case Kind::object: return "an object";
  }
  return "?";
}

std::string_view JsonDocument::Value::key() const {
  return std::string_view(doc_->chars_).substr(node().key_at, node().key_size);
}

template <class F>
void JsonDocument::Value::for_each_child(F f) const {
  if (!is_array() && !is_object()) return;
  for (uint32_t i = at_ + 1; i < node().end; i = doc_->nodes_[i].end) f(i);
}

std::vector<JsonDocument::Value> JsonDocument::Value::elements() const {
  std::vector<Value> out;
  for_each_child([&](uint32_t i) { out.push_back(Value(doc_, i)); });
  return out;
}

std::vector<std::pair<std::string_view, JsonDocument::Value>> JsonDocument::Value::members() const {
  std::vector<std::pair<std::string_view, Value>> out;
  if (is_object()) for_each_child([&](uint32_t i) { out.emplace_back(Value(doc_, i).key(), Value(doc_, i)); });
  return out;
}

std::optional<JsonDocument::Value> JsonDocument::Value::find(std::string_view key) const {
  std::optional<Value> found;
  if (is_object())
    for_each_child([&](uint32_t i) {
      if (Value(doc_, i).key() == key) found = Value(doc_, i);
    });
  return found;
}

}  // namespace acc::io
