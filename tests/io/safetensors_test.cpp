// safetensors: round trips of every dtype, files written by hand the way other tools write
// them, lazy range reads, and the errors for corrupted files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "acc/io/safetensors.h"
#include "acc/kernels/convert.h"
#include "support/test_support.h"

namespace fs = std::filesystem;
using acc::DType;
using acc::Tensor;

using acc::test::error_of;
using acc::test::fresh_dir;

namespace {

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  return {p, p + t.nbytes()};
}

// A file with the given header text (padding added) followed by `data_bytes` bytes.
void write_raw(const fs::path& path, std::string header, size_t data_bytes) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header;
  out << std::string(data_bytes, '\x01');
}

std::string load_error(const fs::path& path) {
  return error_of([&] { acc::io::load_safetensors(path); });
}

}  // namespace

TEST(Safetensors, RoundTripEveryDtype) {
  const auto dir = fresh_dir("roundtrip");
  std::vector<std::pair<std::string, Tensor>> tensors = {
      {"w.f32", Tensor::randn({3, 5}, 1, "a")},
      {"w.bf16", Tensor::randn({7}, 2, "b", 0.f, 1.f, DType::bf16)},
      {"ids", Tensor::from_vector_i32(acc::test::random_ints(9, 3, -1000, 1000), {3, 3})},
      {"big", Tensor::from_vector_i64({int64_t{1} << 40, -5, 7}, {3})},
      {"scalar", Tensor::full({}, 2.5)},
      {"empty", Tensor::zeros({0, 4})},
  };
  acc::io::save_safetensors(dir / "m.safetensors", tensors, {{"format", "pt"}, {"q\"uote", "a\\b"}});

  acc::io::SafetensorsReader reader(dir / "m.safetensors");
  EXPECT_EQ(reader.metadata().at("format"), "pt");
  EXPECT_EQ(reader.metadata().at("q\"uote"), "a\\b");
  ASSERT_EQ(reader.entries().size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) EXPECT_EQ(reader.entries()[i].name, tensors[i].first);

  auto loaded = acc::io::load_safetensors(dir / "m.safetensors");
  ASSERT_EQ(loaded.size(), tensors.size());
  for (const auto& [name, t] : tensors) {
    const Tensor& got = loaded.at(name);
    EXPECT_EQ(got.dtype(), t.dtype()) << name;
    EXPECT_EQ(got.shape(), t.shape()) << name;
    EXPECT_EQ(bytes_of(got), bytes_of(t)) << name;
  }
  // Only the final file is left: the temporary was renamed.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

TEST(Safetensors, HeaderIsPaddedAndOffsetsAreContiguous) {
  const auto dir = fresh_dir("layout");
  acc::io::save_safetensors(dir / "a.safetensors",
                            {{"x", Tensor::zeros({3})}, {"y", Tensor::zeros({1}, DType::bf16)}});
  std::ifstream in(dir / "a.safetensors", std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
  std::string header(n, '\0');
  in.read(header.data(), static_cast<std::streamsize>(n));
  EXPECT_EQ(header.rfind("{\"x\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]},"
                         "\"y\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[12,14]}}", 0),
            0u)
      << header;
  EXPECT_EQ(fs::file_size(dir / "a.safetensors"), 8 + n + 14);
}

// Files from other writers order keys differently, use whitespace and may store tensors in any
// order in the data section.
TEST(Safetensors, ReadsForeignLayout) {
  const auto dir = fresh_dir("foreign");
  const fs::path path = dir / "f.safetensors";
  write_raw(path,
            "{ \"b\" : {\"shape\": [2], \"data_offsets\": [0, 8], \"dtype\": \"I32\"},\n"
            "  \"a\": {\"data_offsets\": [8, 12], \"dtype\": \"F32\", \"shape\": []},"
            "  \"__metadata__\": {\"format\": \"pt\"}}",
            0);
  // Overwrite the data section with known values.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&n), 8);
    const int32_t b[2] = {7, -3};
    const float a = 1.5f;
    f.seekp(static_cast<std::streamoff>(8 + n));
    f.write(reinterpret_cast<const char*>(b), 8);
    f.write(reinterpret_cast<const char*>(&a), 4);
  }
  auto loaded = acc::io::load_safetensors(path);
  EXPECT_EQ(loaded.at("b").to_vector_i64(), (std::vector<int64_t>{7, -3}));
  EXPECT_EQ(loaded.at("a").item(), 1.5f);
  EXPECT_EQ(loaded.at("a").dim(), 0);
}

TEST(Safetensors, PartialRangeReads) {
  const auto dir = fresh_dir("range");
  const Tensor w = Tensor::randn({13, 7}, 5, "w");  // 91 elements: odd sizes on purpose
  const Tensor h = Tensor::randn({33}, 6, "h", 0.f, 1.f, DType::bf16);
  acc::io::save_safetensors(dir / "r.safetensors", {{"h", h}, {"w", w}});
  acc::io::SafetensorsReader reader(dir / "r.safetensors");

  const auto all = w.to_vector();
  for (auto [b, e] : std::vector<std::pair<int64_t, int64_t>>{{0, 91}, {0, 1}, {17, 50}, {90, 91}, {40, 40}}) {
    const Tensor part = reader.read_range("w", b, e);
    EXPECT_EQ(part.shape(), (acc::Shape{e - b}));
    EXPECT_EQ(part.to_vector(), std::vector<float>(all.begin() + b, all.begin() + e)) << b << ".." << e;
  }
  std::vector<acc::bfloat16> dst(10);
  reader.read_range_into("h", 23, 33, dst.data());
  EXPECT_EQ(std::memcmp(dst.data(), h.data<acc::bfloat16>() + 23, 20), 0);

  EXPECT_THROW(reader.read_range("w", 80, 92), acc::Error);
  EXPECT_THROW(reader.read_range("w", 5, 4), acc::Error);
  EXPECT_THROW(reader.read("nope"), acc::Error);
}

TEST(Safetensors, CorruptFilesNameTheProblem) {
  const auto dir = fresh_dir("corrupt");
  const std::string ok = R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  struct Case {
    std::string name, header;
    size_t data;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"json", R"({"x":{"dtype":"F32",)", 8, "invalid JSON"},
      {"dtype", R"({"x":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", 4, "'F16' is not supported"},
      {"bytes", R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8, "needs 12"},
      {"range", ok, 4, "runs past the data section"},
      {"overlap", R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}})",
       8, "overlaps"},
      {"negative", R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8, "shape[0]"},
      {"offsets", R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8]}})", 8, "expected [begin, end]"},
      {"field", R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", 8, "unknown field 'extra'"},
      {"meta", R"({"__metadata__":{"k":3}})", 0, "metadata values must be strings"},
      {"twice", R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, "[\"x\"]: named twice"},
      {"huge", R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}})", 8, "needs 8"},
      {"toplevel", R"([1,2])", 0, "does not start with '{'"},
  };
  for (const auto& c : cases) {
    const fs::path path = dir / (c.name + ".safetensors");
    write_raw(path, c.header, c.data);
    const std::string err = load_error(path);
    EXPECT_NE(err.find(c.expect), std::string::npos) << c.name << ": " << err;
    EXPECT_NE(err.find(path.string()), std::string::npos) << c.name << ": " << err;
  }

  // A header length beyond the file and a file shorter than the length field.
  const fs::path huge = dir / "huge.safetensors";
  write_raw(huge, ok, 8);
  {
    std::fstream f(huge, std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t n = 4096;
    f.write(reinterpret_cast<const char*>(&n), 8);
  }
  EXPECT_NE(load_error(huge).find("runs past the end"), std::string::npos) << load_error(huge);
  const fs::path tiny = dir / "tiny.safetensors";
  std::ofstream(tiny) << "abc";
  EXPECT_NE(load_error(tiny).find("too short"), std::string::npos) << load_error(tiny);
  EXPECT_NE(load_error(dir / "missing.safetensors").find("cannot open"), std::string::npos);
}

TEST(Safetensors, SaveRejectsBadInputAndLeavesNothingBehind) {
  const auto dir = fresh_dir("save_errors");
  EXPECT_THROW(acc::io::save_safetensors(dir / "d.safetensors",
                                         {{"a", Tensor::zeros({1})}, {"a", Tensor::zeros({2})}}),
               acc::Error);
  EXPECT_THROW(acc::io::save_safetensors(dir / "m.safetensors", {{"__metadata__", Tensor::zeros({1})}}),
               acc::Error);
  EXPECT_THROW(acc::io::save_safetensors(dir / "no_such_dir" / "x.safetensors", {{"a", Tensor::zeros({1})}}),
               acc::Error);
  EXPECT_TRUE(fs::is_empty(dir));
}

// The streaming writer: tensors in any order, a large one in pieces; the same file and
// checksums as writing each at once; an unfinished file leaves nothing behind.
TEST(SafetensorsWriter, StreamsTensorsInAnyOrderAndInPieces) {
  const auto dir = fresh_dir("writer");
  const Tensor a = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}), b = Tensor::from_vector({7, 8}, {2});
  acc::io::save_safetensors(dir / "whole.safetensors", {{"a", a}, {"b", b}});
  {
    acc::io::SafetensorsWriter w(dir / "pieces.safetensors", {{"a", DType::f32, {2, 3}}, {"b", DType::f32, {2}}});
    w.write("b", b.raw_data());
    w.append("a", a.data<float>(), 2 * sizeof(float));
    w.append("a", a.data<float>() + 2, 4 * sizeof(float));
    EXPECT_EQ(w.crc32("a"), acc::io::crc32(a.raw_data(), a.nbytes()));
    EXPECT_NE(error_of([&] { w.append("a", a.raw_data(), 4); }).find("holds 24 bytes"), std::string::npos);
    w.finish();
  }
  std::ifstream x(dir / "whole.safetensors", std::ios::binary), y(dir / "pieces.safetensors", std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(x), {}), std::string(std::istreambuf_iterator<char>(y), {}));
  {
    acc::io::SafetensorsWriter w(dir / "unfinished.safetensors", {{"a", DType::f32, {2, 3}}});
    w.append("a", a.raw_data(), 8);
    EXPECT_NE(error_of([&] { w.finish(); }).find("never written"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(dir / "unfinished.safetensors"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 2);
}
