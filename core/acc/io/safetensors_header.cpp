#include "acc/io/safetensors_header.h"

#include <Poco/Exception.h>
#include <Poco/JSON/Array.h>
#include <Poco/JSON/Object.h>
#include <Poco/JSON/Parser.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "acc/util/error.h"

namespace acc::io::safetensors_detail {

namespace {

constexpr const char* kMetadataKey = "__metadata__";

void append_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += '"';
}

DType parse_dtype(const std::string& code, const std::string& where) {
  if (code == "F32") return DType::f32;
  if (code == "BF16") return DType::bf16;
  if (code == "I32") return DType::i32;
  if (code == "I64") return DType::i64;
  ACC_FAIL(where, ".dtype: '", code, "' is not supported (acc reads F32, BF16, I32, I64)");
}

// A JSON integer that must be >= 0; `where` names the field for the error.
uint64_t non_negative(const Poco::Dynamic::Var& v, const std::string& where) {
  ACC_CHECK(v.isInteger(), where, ": expected a non-negative integer, got '", v.toString(), "'");
  if (v.isSigned()) {
    const auto x = v.convert<Poco::Int64>();
    ACC_CHECK(x >= 0, where, ": expected a non-negative integer, got ", x);
    return static_cast<uint64_t>(x);
  }
  return v.convert<Poco::UInt64>();
}

SafetensorsEntry parse_entry(const std::string& name, const Poco::JSON::Object::Ptr& obj,
                             const std::string& where) {
  for (const auto& key : obj->getNames())
    ACC_CHECK(key == "dtype" || key == "shape" || key == "data_offsets", where, ": unknown field '",
              key, "' (expected dtype, shape, data_offsets)");
  ACC_CHECK(obj->has("dtype") && obj->get("dtype").isString(), where,
            ".dtype: missing or not a string");
  ACC_CHECK(obj->isArray("shape"), where, ".shape: missing or not an array");
  ACC_CHECK(obj->isArray("data_offsets"), where, ".data_offsets: missing or not an array");

  SafetensorsEntry e;
  e.name = name;
  e.dtype = parse_dtype(obj->get("dtype").toString(), where);
  const auto shape = obj->getArray("shape");
  for (size_t i = 0; i < shape->size(); ++i) {
    const uint64_t d = non_negative(shape->get(i), where + ".shape[" + std::to_string(i) + "]");
    ACC_CHECK(d < (uint64_t{1} << 48), where, ".shape[", i, "]: ", d, " is implausibly large");
    e.shape.push_back(static_cast<int64_t>(d));
  }
  const auto offsets = obj->getArray("data_offsets");
  ACC_CHECK(offsets->size() == 2, where, ".data_offsets: expected [begin, end], got ",
            offsets->size(), " values");
  e.begin = non_negative(offsets->get(0), where + ".data_offsets[0]");
  e.end = non_negative(offsets->get(1), where + ".data_offsets[1]");
  ACC_CHECK(e.begin <= e.end, where, ".data_offsets: begin ", e.begin, " > end ", e.end);
  const uint64_t expected = static_cast<uint64_t>(e.numel()) * dtype_size(e.dtype);
  ACC_CHECK(e.end - e.begin == expected, where, ": data_offsets [", e.begin, ", ", e.end,
            ") hold ", e.end - e.begin, " bytes but ", dtype_code(e.dtype), shape_str(e.shape),
            " needs ", expected);
  return e;
}

}  // namespace

std::string dtype_code(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
  }
  ACC_FAIL("safetensors: unknown dtype");
}

std::string build_header(const std::vector<SafetensorsEntry>& entries,
                         const SafetensorsMetadata& metadata) {
  std::string out = "{";
  bool first = true;
  if (!metadata.empty()) {
    append_json_string(out, kMetadataKey);
    out += ":{";
    for (const auto& [key, value] : metadata) {
      if (!first) out += ',';
      first = false;
      append_json_string(out, key);
      out += ':';
      append_json_string(out, value);
    }
    out += '}';
    first = false;
  }
  for (const auto& e : entries) {
    if (!first) out += ',';
    first = false;
    append_json_string(out, e.name);
    out += ":{\"dtype\":\"" + dtype_code(e.dtype) + "\",\"shape\":[";
    for (size_t i = 0; i < e.shape.size(); ++i) {
      if (i) out += ',';
      out += std::to_string(e.shape[i]);
    }
    out += "],\"data_offsets\":[" + std::to_string(e.begin) + "," + std::to_string(e.end) + "]}";
  }
  out += '}';
  out.append((8 - out.size() % 8) % 8, ' ');
  return out;
}

ParsedHeader parse_header(const std::string& json, uint64_t data_size, const std::string& file) {
  const std::string where = "safetensors '" + file + "': header";
  Poco::JSON::Object::Ptr root;
  try {
    Poco::JSON::Parser parser;
    Poco::Dynamic::Var parsed = parser.parse(json);
    ACC_CHECK(parsed.type() == typeid(Poco::JSON::Object::Ptr), where,
              ": expected a JSON object at the top level");
    root = parsed.extract<Poco::JSON::Object::Ptr>();
  } catch (const Poco::Exception& e) {
    ACC_FAIL(where, ": invalid JSON (", e.displayText(), ")");
  }

  ParsedHeader header;
  try {
    for (const auto& name : root->getNames()) {
      const std::string field = where + "[\"" + name + "\"]";
      ACC_CHECK(root->isObject(name), field, ": expected an object");
      const auto obj = root->getObject(name);
      if (name == kMetadataKey) {
        for (const auto& key : obj->getNames()) {
          ACC_CHECK(obj->get(key).isString(), field, "[\"", key, "\"]: metadata values must be strings");
          header.metadata[key] = obj->get(key).toString();
        }
        continue;
      }
      header.entries.push_back(parse_entry(name, obj, field));
    }
  } catch (const Poco::Exception& e) {
    ACC_FAIL(where, ": ", e.displayText());
  }

  auto& entries = header.entries;
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    ACC_CHECK(e.end <= data_size, where, "[\"", e.name, "\"].data_offsets: [", e.begin, ", ", e.end,
              ") runs past the data section of ", data_size, " bytes (file truncated?)");
    if (i > 0)
      ACC_CHECK(entries[i - 1].end <= e.begin, where, ": data of \"", entries[i - 1].name, "\" [",
                entries[i - 1].begin, ", ", entries[i - 1].end, ") overlaps \"", e.name, "\" [",
                e.begin, ", ", e.end, ")");
  }
  return header;
}

}  // namespace acc::io::safetensors_detail
