#include "support/test_support.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "acc/tensor/random.h"
#include "acc/util/error.h"

namespace acc::test {

std::vector<float> random_vector(int64_t n, uint64_t seed, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  random::fill_normal(v.data(), 0, n, random::stream_key(seed, "test"), 0.f, scale);
  return v;
}

std::vector<int32_t> random_ints(int64_t n, uint64_t seed, int32_t low, int32_t high) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  const uint64_t key = random::stream_key(seed, "test-ints");
  const uint64_t span = static_cast<uint64_t>(high - low);
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = low + static_cast<int32_t>(random::bits(key, static_cast<uint64_t>(i)) % span);
  return v;
}

namespace {

// The folders fresh_dir made in this process, removed when it exits, unless a test failed:
// then they stay for a look, named on stderr.
struct ScratchFolders {
  std::vector<std::filesystem::path> made;
  ~ScratchFolders() {
    const bool keep = ::testing::UnitTest::GetInstance()->Failed();
    std::error_code ignored;
    for (const auto& dir : made) {
      if (keep)
        std::fprintf(stderr, "a test failed: its scratch folder %s is kept\n", dir.c_str());
      else
        std::filesystem::remove_all(dir, ignored);
    }
  }
};

ScratchFolders& scratch_folders() {
  static ScratchFolders folders;
  return folders;
}

}  // namespace

std::filesystem::path fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("acc_test_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  scratch_folders().made.push_back(dir);
  return dir;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

void expect_contains(const std::string& text, const std::vector<std::string>& parts) {
  for (const auto& part : parts) EXPECT_NE(text.find(part), std::string::npos) << "missing '" << part << "' in: " << text;
}

::testing::AssertionResult all_close(const float* a, const float* b, int64_t n, float rtol, float atol) {
  int64_t worst = -1;
  double worst_excess = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double diff = std::fabs(static_cast<double>(a[i]) - b[i]);
    const double allowed = atol + rtol * std::fabs(static_cast<double>(b[i]));
    const bool nan_mismatch = std::isnan(a[i]) != std::isnan(b[i]);
    if (nan_mismatch || diff > allowed) {
      ++bad;
      const double excess = nan_mismatch ? INFINITY : diff - allowed;
      if (worst < 0 || excess > worst_excess) worst = i, worst_excess = excess;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << n << " elements differ; worst at index "
                                       << worst << ": " << a[worst] << " vs " << b[worst]
                                       << " (rtol " << rtol << ", atol " << atol << ")";
}

}  // namespace acc::test
