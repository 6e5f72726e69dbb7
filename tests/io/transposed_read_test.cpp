// checkpoint::read_transposed, which turns a Conv1D weight stored [in, out] back into acc's
// [out, in] while reading any element range of it, against the plain transpose, element by
// element: ranges starting and ending mid-row, single rows, the whole matrix, both ways of
// reading (whole stored rows, or each stored row's columns), and matrices wider than one block.
// The same ranges served by PieceReader::verify_all from the chunks it reads for a checksum
// (transposed or not, chunks of several MB), and a damaged entry still failing its check. Reads
// beside the checks summed on the way: each sum the CRC-32 of the bytes summed_range() names.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
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
  uint32_t crc;  // of the stored bytes
};

Stored write_stored(const fs::path& dir, int64_t cols, int64_t rows) {
  std::vector<float> values(static_cast<size_t>(cols * rows));
  std::iota(values.begin(), values.end(), 0.0f);
  std::string name = std::to_string(cols);
  name.append("x").append(std::to_string(rows)).append(".safetensors");
  const fs::path file = dir / name;
  acc::io::SafetensorsWriter w(file, {{"w", acc::DType::f32, {cols, rows}}});
  w.write("w", values.data());
  const uint32_t crc = w.crc32("w");
  w.finish();
  return {cols, rows, file, crc};
}

// acc's element k of a range starting at `begin`: of the transpose, or of the stored order.
float expected(const Stored& m, bool transposed, int64_t begin, int64_t k) {
  if (!transposed) return static_cast<float>(begin + k);
  const int64_t i = (begin + k) / m.cols, j = (begin + k) % m.cols;  // acc's (i, j) = stored (j, i)
  return static_cast<float>(j * m.rows + i);
}

void expect_range(const Stored& m, int64_t begin, int64_t count) {
  const acc::io::SafetensorsReader reader(m.file);
  std::vector<float> got(static_cast<size_t>(count), -1.0f);
  acc::checkpoint::read_transposed(reader, "w", m.cols, m.rows, begin, count, got.data());
  for (int64_t k = 0; k < count; ++k) {
    ASSERT_EQ(got[static_cast<size_t>(k)], expected(m, true, begin, k))
        << m.cols << "x" << m.rows << " stored, range [" << begin << ", " << begin + count << "), element " << k;
  }
}

TEST(ReadTransposed, EveryRangeIsTheTransposeOfTheStoredMatrix) {
  const fs::path dir = acc::test::fresh_dir("read_transposed");
  // 7 x 13: narrow; 300 x 700: more than 64 stored rows and wider than a 512 KiB block of them
  // (both read in whole stored rows, a row being short); 100 x 9000: stored rows of 36 KB, so a
  // range needing under half of each reads just those columns, row by row, over several blocks
  // of stored rows.
  for (const auto& [cols, rows] : {std::pair<int64_t, int64_t>{7, 13}, {300, 700}, {100, 9000}}) {
    const Stored m = write_stored(dir, cols, rows);
    const int64_t n = cols * rows;
    expect_range(m, 0, n);                  // whole: whole stored rows
    expect_range(m, 0, cols);               // one acc row: one column of each stored row (100 x 9000)
    expect_range(m, cols / 2, cols);        // mid-row to mid-row, two acc rows
    expect_range(m, cols + 1, cols - 2);    // inside one acc row, both ends mid-row
    expect_range(m, n / 3 + 1, n / 3);      // a third, mid-row: columns only (100 x 9000)
    expect_range(m, n / 4 + 3, n / 2 + 5);  // over half the rows: whole stored rows, cut
    expect_range(m, n - 1, 1);              // the last element
  }
}

// A 16 MB-plus entry is checked in several chunks; reads of it are served from them.
TEST(ReadTransposed, ReadsServedByTheChecksumPassAreThoseOfAPlainRead) {
  const fs::path dir = acc::test::fresh_dir("checked_reads");
  const Stored m = write_stored(dir, 1500, 3001);  // 4.5M elements: two chunks, not row-aligned for 4M
  const int64_t n = m.cols * m.rows;
  for (const bool transposed : {true, false}) {
    acc::checkpoint::Manifest manifest;
    manifest.files[m.file.filename().string()] = fs::file_size(m.file);
    const acc::checkpoint::PieceRecord piece{m.file.filename().string(), "w", 0, n, m.crc, transposed};
    const std::vector<std::pair<int64_t, int64_t>> ranges = {
        {0, n}, {0, m.cols}, {m.cols / 2, m.cols}, {m.cols + 1, m.cols - 2}, {n / 3 + 1, n / 3}, {n - 1, 1}};
    std::vector<std::vector<float>> got;
    std::vector<acc::checkpoint::PieceReader::Read> reads;
    for (const auto& [begin, count] : ranges) got.emplace_back(static_cast<size_t>(count), -1.0f);
    for (size_t r = 0; r < ranges.size(); ++r) reads.push_back({&piece, ranges[r].first, ranges[r].second, got[r].data()});
    acc::checkpoint::PieceReader files(dir, manifest);
    files.verify_all({&piece}, reads);
    for (size_t r = 0; r < ranges.size(); ++r) {
      for (int64_t k = 0; k < ranges[r].second; ++k) {
        ASSERT_EQ(got[r][static_cast<size_t>(k)], expected(m, transposed, ranges[r].first, k))
            << (transposed ? "transposed" : "in order") << ", range [" << ranges[r].first << ", +"
            << ranges[r].second << "), element " << k;
      }
    }
  }
  // One byte altered in the second chunk: the check fails although its reads were served.
  {
    std::fstream f(m.file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-8, std::ios::end);
    f.put('\x7f');
  }
  acc::checkpoint::Manifest manifest;
  manifest.files[m.file.filename().string()] = fs::file_size(m.file);
  const acc::checkpoint::PieceRecord piece{m.file.filename().string(), "w", 0, n, m.crc, true};
  std::vector<float> whole(static_cast<size_t>(n));
  acc::checkpoint::PieceReader files(dir, manifest);
  EXPECT_THROW(files.verify_all({&piece}, {{&piece, 0, n, whole.data()}}), acc::Error);
}

// Reads that are not checked here sum what they read, for a load's shared check
// (SharedCheck): a read of a plain entry sums its own range (cut into 16 MB parts, their sums
// combined), a transposed read in whole stored rows sums the whole entry, and one of parts of
// stored rows cannot sum anything.
TEST(ReadTransposed, ReadsBesideTheChecksSumWhatTheyRead) {
  const fs::path dir = acc::test::fresh_dir("summed_reads");
  const Stored m = write_stored(dir, 1500, 3001);  // 18 MB: a whole read is two parts
  const Stored wide = write_stored(dir, 100, 9000);
  const int64_t n = m.cols * m.rows;
  acc::checkpoint::Manifest manifest;
  for (const Stored* s : {&m, &wide}) manifest.files[s->file.filename().string()] = fs::file_size(s->file);
  const acc::checkpoint::PieceRecord plain{m.file.filename().string(), "w", 0, n, m.crc, false};
  const acc::checkpoint::PieceRecord transposed{m.file.filename().string(), "w", 0, n, m.crc, true};
  const acc::checkpoint::PieceRecord wide_transposed{wide.file.filename().string(), "w", 0, wide.cols * wide.rows,
                                                     wide.crc, true};
  std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n / 3)), c(static_cast<size_t>(n / 2 + 5)),
      d(static_cast<size_t>(wide.cols));
  const std::vector<acc::checkpoint::PieceReader::Read> reads = {{&plain, 0, n, a.data()},
                                                                 {&plain, n / 3 + 1, n / 3, b.data()},
                                                                 {&transposed, n / 4 + 3, n / 2 + 5, c.data()},
                                                                 {&wide_transposed, 0, wide.cols, d.data()}};
  acc::checkpoint::PieceReader files(dir, manifest);
  EXPECT_EQ(files.summed_range(reads[0]), std::pair(int64_t{0}, n));
  EXPECT_EQ(files.summed_range(reads[1]), std::pair(n / 3 + 1, n / 3 + 1 + n / 3));
  EXPECT_EQ(files.summed_range(reads[2]), std::pair(int64_t{0}, n));  // whole stored rows
  EXPECT_EQ(files.summed_range(reads[3]), std::nullopt);              // one column of each
  const auto sums = files.verify_all({}, reads, {true, true, true, false});
  ASSERT_EQ(sums.size(), 4u);
  // The stored values are 0, 1, 2, ...: the CRC of a range is that of those floats.
  auto crc_of = [](int64_t first, int64_t count) {
    std::vector<float> v(static_cast<size_t>(count));
    std::iota(v.begin(), v.end(), static_cast<float>(first));
    return acc::io::crc32(v.data(), v.size() * sizeof(float));
  };
  EXPECT_EQ(sums[0], m.crc);
  EXPECT_EQ(sums[1], crc_of(n / 3 + 1, n / 3));
  EXPECT_EQ(sums[2], m.crc);
  EXPECT_EQ(sums[3], 0u);
  EXPECT_EQ(a[static_cast<size_t>(n - 1)], expected(m, false, 0, n - 1));
  EXPECT_EQ(c[0], expected(m, true, n / 4 + 3, 0));
  EXPECT_EQ(d[7], expected(wide, true, 0, 7));
}

}  // namespace
