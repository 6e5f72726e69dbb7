#pragma once
// A JSON text parsed into one flat array of values, for the files a load reads before anything
// else (a checkpoint's manifest, safetensors headers). Poco's tokenizer feeds it; unlike Poco's
// own tree (a heap object per value, each new page of them a fault on a process's fresh heap) a
// document is a few large blocks: GPT-2 small's manifest at 4 ranks parsed in 9 ms on a fresh
// heap with Poco's tree, in 3 ms this way.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace acc::io {

class JsonDocument {
 public:
  enum class Kind : uint8_t { null, boolean, integer, number, string, array, object };

 private:
  // In document order; a container's values follow it, `end` is one past its last.
  struct Node {
    Kind kind = Kind::null;
    bool negative = false;  // an integer below zero (bits hold it as int64)
    uint32_t end = 0;
    uint32_t key_at = 0, key_size = 0;  // a member's key in chars_
    uint64_t bits = 0;                  // boolean, integer, double's bits, or a string's place
  };

 public:
  // Throws an error naming `where` (a file, say) when `text` is not valid JSON.
  JsonDocument(const std::string& text, const std::string& where);
  // Values point into their document: it stays where it was made.
  JsonDocument(const JsonDocument&) = delete;
  JsonDocument& operator=(const JsonDocument&) = delete;

  // One value of the document, a view: valid while the document lives.
  class Value {
   public:
    Kind kind() const { return node().kind; }
    bool is_null() const { return kind() == Kind::null; }
    bool is_bool() const { return kind() == Kind::boolean; }
    bool is_integer() const { return kind() == Kind::integer; }
    bool is_string() const { return kind() == Kind::string; }
    bool is_array() const { return kind() == Kind::array; }
    bool is_object() const { return kind() == Kind::object; }

    bool as_bool() const;                       // a boolean's value, else false
    std::optional<int64_t> as_int64() const;    // an integer that fits
    std::optional<uint64_t> as_uint64() const;  // a non-negative integer
    std::string_view as_string() const;         // a string's text, else empty
    // The value as an error message shows it: a string quoted, a number (6 significant digits
    // if not an integer), or its kind.
    std::string describe() const;

    // An array's elements, or an object's members' values, in document order.
    std::vector<Value> elements() const;
    // An object's members in document order, keys with their values.
    std::vector<std::pair<std::string_view, Value>> members() const;
    // An object's member `key` (the last, if the text repeats it), or nothing.
    std::optional<Value> find(std::string_view key) const;

   private:
    friend class JsonDocument;
    Value(const JsonDocument* doc, uint32_t at) : doc_(doc), at_(at) {}
    const Node& node() const { return doc_->nodes_[at_]; }
    std::string_view key() const;
    // Calls f(child index) for each value directly inside this array or object.
    template <class F>
    void for_each_child(F f) const;

    const JsonDocument* doc_;
    uint32_t at_;
  };

  Value root() const { return Value(this, 0); }

 private:
  class Builder;  // what Poco's parser fills the document through
  std::vector<Node> nodes_;
  std::string chars_;  // every key and string, one after another
};

}  // namespace acc::io
