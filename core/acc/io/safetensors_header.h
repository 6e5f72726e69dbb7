#pragma once
// The JSON header of a safetensors file: building it for the writer and validating it for the
// reader. Internal to acc::io (see safetensors.h for the format).
#include <cstdint>
#include <string>
#include <vector>

#include "acc/io/safetensors.h"

namespace acc::io::safetensors_detail {

// "F32", "BF16", "I32", "I64".
std::string dtype_code(DType dtype);

// The header text for entries laid out in the given order, padded with spaces to a multiple of
// 8 bytes.
std::string build_header(const std::vector<SafetensorsEntry>& entries,
                         const SafetensorsMetadata& metadata);

struct ParsedHeader {
  std::vector<SafetensorsEntry> entries;  // sorted by data offset
  SafetensorsMetadata metadata;
};

// Parses and checks a header against a data section of `data_size` bytes: JSON shape, dtypes,
// shapes, offsets inside the data and not overlapping, bytes == numel * dtype size. `file` only
// names the file in error messages.
ParsedHeader parse_header(const std::string& json, uint64_t data_size, const std::string& file);

}  // namespace acc::io::safetensors_detail
