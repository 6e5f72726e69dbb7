#pragma once
// Shared helpers for acc's tests: deterministic random inputs and tolerance comparisons that
// report the first mismatching index.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace acc::test {

// n values from N(0, scale^2), deterministic in (seed).
std::vector<float> random_vector(int64_t n, uint64_t seed, float scale = 1.f);
std::vector<int32_t> random_ints(int64_t n, uint64_t seed, int32_t low, int32_t high);

// An empty scratch folder for one test, under the system temp folder (the process id keeps
// concurrent runs apart), removed when the process exits if no test failed.
std::filesystem::path fresh_dir(const std::string& name);

// The message of the acc::Error that f throws, or "no error".
std::string error_of(const std::function<void()>& f);
// A failure for each of `parts` that `text` does not contain, showing the text.
void expect_contains(const std::string& text, const std::vector<std::string>& parts);

// Passes when |a[i]-b[i]| <= atol + rtol*|b[i]| for all i; otherwise names the worst index.
::testing::AssertionResult all_close(const float* a, const float* b, int64_t n, float rtol,
                                     float atol);
inline ::testing::AssertionResult all_close(const std::vector<float>& a,
                                            const std::vector<float>& b, float rtol, float atol) {
  if (a.size() != b.size())
    return ::testing::AssertionFailure() << "sizes differ: " << a.size() << " vs " << b.size();
  return all_close(a.data(), b.data(), static_cast<int64_t>(a.size()), rtol, atol);
}

}  // namespace acc::test
