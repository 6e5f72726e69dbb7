// checkpoint::read_transposed, which turns a Conv1D weight stored [in, out] back into acc's
// [out, in] while reading any element range of it, against the plain transpose, element by
// element: ranges starting and ending mid-row, single rows, the whole matrix, both ways of
// reading (whole stored rows, or each stored row's columns), and matrices wider than one block.
#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>

#include "acc/checkpoint/piece_reader.h"
#include "acc/io/safetensors.h"
#include "support/test_support.h"

namespace {

namespace fs = std::filesystem;

// A stored [cols, rows] matrix of distinct values; acc reads it as [rows, cols].
struct Stored {
  int64_t cols, rows;
  fs::path file;
};

Stored write_stored(const fs::path& dir, int64_t cols, int64_t rows) {
  std::vector<float> values(static_cast<size_t>(cols * rows));
  std::iota(values.begin(), values.end(), 0.0f);
  std::string name = std::to_string(cols);
  name.append("x").append(std::to_string(rows)).append(".safetensors");
  const fs::path file = dir / name;
  acc::io::SafetensorsWriter w(file, {{"w", acc::DType::f32, {cols, rows}}});
  w.write("w", values.data());
  w.finish();
  return {cols, rows, file};
}

void expect_range(const Stored& m, int64_t begin, int64_t count) {
  const acc::io::SafetensorsReader reader(m.file);
  std::vector<float> got(static_cast<size_t>(count), -1.0f);
  acc::checkpoint::read_transposed(reader, "w", m.cols, m.rows, begin, count, got.data());
  for (int64_t k = 0; k < count; ++k) {
    const int64_t i = (begin + k) / m.cols, j = (begin + k) % m.cols;  // acc's (i, j) = stored (j, i)
    ASSERT_EQ(got[static_cast<size_t>(k)], static_cast<float>(j * m.rows + i))
        << m.cols << "x" << m.rows << " stored, range [" << begin << ", " << begin + count << "), element " << k;
  }
}

TEST(ReadTransposed, EveryRangeIsTheTransposeOfTheStoredMatrix) {
  const fs::path dir = acc::test::fresh_dir("read_transposed");
  // 7 x 13: narrow; 300 x 700: more than 64 stored rows and wider than a 512 KiB block of them.
  for (const auto& [cols, rows] : {std::pair<int64_t, int64_t>{7, 13}, {300, 700}}) {
    const Stored m = write_stored(dir, cols, rows);
    const int64_t n = cols * rows;
    expect_range(m, 0, n);                  // whole: whole stored rows
    expect_range(m, 0, cols);               // one acc row: each stored row's column
    expect_range(m, cols / 2, cols);        // mid-row to mid-row, two acc rows
    expect_range(m, n / 3 + 1, n / 3);      // a third, mid-row: columns only
    expect_range(m, n / 4 + 3, n / 2 + 5);  // over half the rows: whole stored rows, cut
    expect_range(m, n - 1, 1);              // the last element
  }
}

}  // namespace
