// IDX files (MNIST format), raw and gzipped, written by the test; and the real Fashion-MNIST
// files when Debian's dataset-fashion-mnist is installed.
#include <gtest/gtest.h>

#include "support/test_support.h"

#include <filesystem>
#include <fstream>

#include "acc/data/idx.h"

namespace fs = std::filesystem;

using acc::test::error_of;
using acc::test::fresh_dir;

namespace {

std::string idx_bytes(uint8_t ndims, const std::vector<uint32_t>& dims, const std::vector<uint8_t>& values) {
  std::string s = {0, 0, 8, static_cast<char>(ndims)};
  for (uint32_t d : dims)
    for (int shift : {24, 16, 8, 0}) s += static_cast<char>((d >> shift) & 0xff);
  s.append(values.begin(), values.end());
  return s;
}

// Hand-made bytes, independent of write_idx, for the cases write_idx refuses to produce.
void write(const fs::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

}  // namespace

TEST(Idx, ImagesAndLabelsRawAndGzipped) {
  const auto dir = fresh_dir("idx");
  // 3 images of 5x7 (odd sizes), pixel p of image i = (i*35 + p*3) % 256, labels 9, 0, 4.
  std::vector<uint8_t> pixels(3 * 35);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>((i * 3 + (i / 35) * 35) % 256);
  pixels[0] = 255;
  for (bool gzip : {false, true}) {
    const std::string suffix = gzip ? ".gz" : "";
    acc::data::write_idx(dir / ("img" + suffix), {{3, 5, 7}, pixels}, gzip);
    acc::data::write_idx(dir / ("lbl" + suffix), {{3}, {9, 0, 4}}, gzip);
    if (!gzip) {  // the writer's bytes are exactly the format's
      std::ifstream in(dir / "img", std::ios::binary);
      EXPECT_EQ(std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()),
                idx_bytes(3, {3, 5, 7}, pixels));
    } else {
      std::ifstream in(dir / "img.gz", std::ios::binary);
      EXPECT_EQ(in.get(), 0x1f);
      EXPECT_EQ(in.get(), 0x8b);
    }

    const auto raw = acc::data::read_idx(dir / ("img" + suffix));
    EXPECT_EQ(raw.dims, (std::vector<int64_t>{3, 5, 7}));
    EXPECT_EQ(raw.values, pixels);

    acc::data::MnistDataset data(dir / ("img" + suffix), dir / ("lbl" + suffix));
    EXPECT_EQ(data.size(), 3);
    const auto batch = data.get_batch(std::vector<int64_t>{2, 0}, {});
    EXPECT_EQ(batch["images"].shape(), (acc::Shape{2, 1, 5, 7}));
    EXPECT_EQ(batch["labels"].to_vector_i64(), (std::vector<int64_t>{4, 9}));
    const auto x = batch["images"].to_vector();
    for (int p = 0; p < 35; ++p) {
      EXPECT_FLOAT_EQ(x[p], pixels[70 + p] / 255.f);
      EXPECT_FLOAT_EQ(x[35 + p], pixels[p] / 255.f);
    }
    EXPECT_EQ(x[35], 1.f);  // 255 maps to exactly 1
  }
}

TEST(Idx, BadFilesNameTheFileAndTheProblem) {
  const auto dir = fresh_dir("idx_bad");
  write(dir / "magic", std::string("\x00\x00\x09\x01\x00\x00\x00\x01\x05", 9));
  write(dir / "short", idx_bytes(3, {2, 2, 2}, {1, 2, 3}));
  write(dir / "dims", idx_bytes(3, {2, 2}, {}));
  write(dir / "gz", "\x1f\x8b garbage that is not deflate data");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"magic", "is not 0x000008NN"}, {"short", "need 8 bytes of data but the file has 3"},
      {"dims", "truncated inside"},   {"gz", "gzip data is corrupt"},
      {"missing", "cannot open"},
  };
  for (const auto& [name, expect] : cases) {
    const std::string err = error_of([&] { acc::data::read_idx(dir / name); });
    EXPECT_NE(err.find(expect), std::string::npos) << name << ": " << err;
    EXPECT_NE(err.find((dir / name).string()), std::string::npos) << err;
  }
  write(dir / "img", idx_bytes(3, {2, 1, 1}, {1, 2}));
  write(dir / "lbl", idx_bytes(1, {3}, {1, 2, 3}));
  EXPECT_NE(error_of([&] { acc::data::MnistDataset(dir / "img", dir / "lbl"); }).find("has 2 images but"),
            std::string::npos);
  EXPECT_NE(error_of([&] { acc::data::MnistDataset(dir / "lbl", dir / "lbl"); }).find("expected [N, rows, cols]"),
            std::string::npos);
}

TEST(Idx, FashionMnistFromDebian) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (run scripts/fetch-data)";
  const auto test = acc::data::MnistDataset::fashion_mnist(/*train=*/false);
  EXPECT_EQ(test.size(), 10000);
  EXPECT_EQ(test.rows(), 28);
  EXPECT_EQ(test.cols(), 28);
  const auto batch = test.get_batch(std::vector<int64_t>{0, 1, 9999}, {});
  // The first test labels of Fashion-MNIST are 9 (ankle boot) and 2 (pullover).
  const auto labels = batch["labels"].to_vector_i64();
  EXPECT_EQ(labels[0], 9);
  EXPECT_EQ(labels[1], 2);
  for (float v : batch["images"].to_vector()) ASSERT_TRUE(v >= 0.f && v <= 1.f);
}
