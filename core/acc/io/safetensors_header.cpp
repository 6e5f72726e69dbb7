#include "acc/io/safetensors_header.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <set>
#include <string_view>

#include "acc/io/json_document.h"
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
uint64_t non_negative(const JsonDocument::Value& v, const std::string& where) {
  const auto x = v.as_uint64();
  ACC_CHECK(x, where, ": expected a non-negative integer, got ", v.describe());
  return *x;
}

SafetensorsEntry parse_entry(std::string_view name, const JsonDocument::Value& obj, const std::string& where) {
  std::optional<JsonDocument::Value> dtype, shape, offsets;
  for (const auto& [key, value] : obj.members()) {
    if (key == "dtype")
      dtype = value;
    else if (key == "shape")
      shape = value;
    else if (key == "data_offsets")
      offsets = value;
    else
      ACC_FAIL(where, ": unknown field '", key, "' (expected dtype, shape, data_offsets)");
  }
  ACC_CHECK(dtype && dtype->is_string(), where, ".dtype: missing or not a string");
  ACC_CHECK(shape && shape->is_array(), where, ".shape: missing or not an array");
  ACC_CHECK(offsets && offsets->is_array(), where, ".data_offsets: missing or not an array");

  SafetensorsEntry e;
  e.name = name;
  e.dtype = parse_dtype(std::string(dtype->as_string()), where);
  const auto dims = shape->elements();
  for (size_t i = 0; i < dims.size(); ++i) {
    const uint64_t d = non_negative(dims[i], where + ".shape[" + std::to_string(i) + "]");
    ACC_CHECK(d < (uint64_t{1} << 48), where, ".shape[", i, "]: ", d, " is implausibly large");
    e.shape.push_back(static_cast<int64_t>(d));
  }
  const auto range = offsets->elements();
  ACC_CHECK(range.size() == 2, where, ".data_offsets: expected [begin, end], got ", range.size(), " values");
  e.begin = non_negative(range[0], where + ".data_offsets[0]");
  e.end = non_negative(range[1], where + ".data_offsets[1]");
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
  const JsonDocument doc(json, where);
  ACC_CHECK(doc.root().is_object(), where, ": expected a JSON object at the top level");

  ParsedHeader header;
  std::set<std::string_view> names;
  for (const auto& [name, obj] : doc.root().members()) {
    const std::string field = where + "[\"" + std::string(name) + "\"]";
    ACC_CHECK(names.insert(name).second, field, ": named twice");
    ACC_CHECK(obj.is_object(), field, ": expected an object");
    if (name == kMetadataKey) {
      for (const auto& [key, value] : obj.members()) {
        ACC_CHECK(value.is_string(), field, "[\"", key, "\"]: metadata values must be strings");
        header.metadata[std::string(key)] = value.as_string();
      }
      continue;
    }
    header.entries.push_back(parse_entry(name, obj, field));
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
