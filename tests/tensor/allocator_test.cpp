#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "acc/memory/allocator.h"
#include "acc/memory/resident.h"
#include "acc/tensor/tensor.h"
#include "support/test_support.h"

namespace acc {
namespace {

using memory::Category;

TEST(Allocator, CountsRequestedBytesPerCategoryExactly) {
  const auto before = memory::report();
  void* p = memory::allocate(100, Category::gradients);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % memory::kAlignment, 0u);
  auto mid = memory::report();
  EXPECT_EQ(mid[Category::gradients].current - before[Category::gradients].current, 100);
  EXPECT_EQ(mid.total.current - before.total.current, 100);
  memory::deallocate(p, 100, Category::gradients);
  EXPECT_EQ(memory::report()[Category::gradients].current, before[Category::gradients].current);
}

TEST(Allocator, ExternalBytesCountLikeAllocations) {
  const auto before = memory::report();
  memory::count_external(Category::communication, 4096);
  const auto mid = memory::report();
  EXPECT_EQ(mid[Category::communication].current - before[Category::communication].current, 4096);
  EXPECT_EQ(mid.total.current - before.total.current, 4096);
  EXPECT_GE(mid[Category::communication].peak, mid[Category::communication].current);
  memory::count_external(Category::communication, -4096);
  EXPECT_EQ(memory::report()[Category::communication].current, before[Category::communication].current);
}

TEST(Allocator, ScopeSetsCategoryOfTensorsAndRestoresIt) {
  const auto before = memory::report();
  {
    memory::CategoryScope scope(Category::optimizer_state);
    Tensor m = Tensor::zeros({10, 10});
    EXPECT_EQ(memory::report()[Category::optimizer_state].current - before[Category::optimizer_state].current,
              400);
    {
      memory::CategoryScope inner(Category::activations);
      EXPECT_EQ(memory::current_category(), Category::activations);
    }
    EXPECT_EQ(memory::current_category(), Category::optimizer_state);
  }
  EXPECT_EQ(memory::current_category(), Category::other);
  EXPECT_EQ(memory::report()[Category::optimizer_state].current, before[Category::optimizer_state].current);
}

TEST(Allocator, PeakFollowsHighWaterMarkAndResets) {
  memory::reset_peaks();
  const int64_t base = memory::report()[Category::activations].current;
  {
    memory::CategoryScope scope(Category::activations);
    Tensor a = Tensor::empty({1000});  // 4000 bytes
    { Tensor b = Tensor::empty({500}, DType::bf16); }  // +1000 then freed
  }
  auto r = memory::report();
  EXPECT_EQ(r[Category::activations].current, base);
  EXPECT_EQ(r[Category::activations].peak, base + 5000);
  memory::reset_peaks();
  EXPECT_EQ(memory::report()[Category::activations].peak, base);
}

TEST(Allocator, ViewsDoNotAllocate) {
  Tensor flat = Tensor::zeros({64});
  const auto before = memory::report();
  Tensor v = flat.slice_flat(16, {4, 4});
  EXPECT_EQ(memory::report().total.current, before.total.current);
  EXPECT_TRUE(v.shares_storage(flat));
}

}  // namespace
}  // namespace acc

namespace acc {
namespace {

TEST(AllocatorCache, LargeFreedBlockIsReusedForSameSizeAndCountsStayExact) {
  memory::release_cached();
  const size_t n = (size_t{3} << 20) + 5;  // large, not page-aligned
  const auto before = memory::report();
  void* a = memory::allocate(n, memory::Category::activations);
  memory::deallocate(a, n, memory::Category::activations);
  auto mid = memory::report();
  EXPECT_EQ(mid.total.current, before.total.current);  // cached bytes are not live
  EXPECT_GE(mid.cached, static_cast<int64_t>(n));
  void* b = memory::allocate(n, memory::Category::gradients);
  EXPECT_EQ(b, a);
  EXPECT_EQ(memory::report().cached, before.cached);
  EXPECT_EQ(memory::report()[memory::Category::gradients].current - before[memory::Category::gradients].current,
            static_cast<int64_t>(n));
  memory::deallocate(b, n, memory::Category::gradients);
  memory::release_cached();
  EXPECT_EQ(memory::report().cached, 0);
}

// The default capacity is half the physical memory over the ranks of the node: shared among
// a million ranks it holds no 2 MiB block, among one it does.
TEST(AllocatorCache, CapacityIsSharedAmongTheRanksOfTheNode) {
  if (std::getenv("ACC_ALLOC_CACHE_MB")) GTEST_SKIP() << "ACC_ALLOC_CACHE_MB sets the capacity";
  const size_t n = size_t{2} << 20;
  auto cached_after_free = [&] {
    memory::release_cached();
    memory::deallocate(memory::allocate(n, memory::Category::other), n, memory::Category::other);
    return memory::report().cached;
  };
  memory::share_cache_among(1 << 20);
  EXPECT_EQ(cached_after_free(), 0);
  memory::share_cache_among(1);
  EXPECT_EQ(cached_after_free(), static_cast<int64_t>(n));
  memory::release_cached();
}

TEST(AllocatorCache, SmallBlocksAreNotCached) {
  memory::release_cached();
  void* a = memory::allocate(1000, memory::Category::other);
  memory::deallocate(a, 1000, memory::Category::other);
  EXPECT_EQ(memory::report().cached, 0);
}

}  // namespace
}  // namespace acc

namespace acc {
namespace {

std::filesystem::path file_tier_dir() {
  const auto dir = std::filesystem::temp_directory_path() / "acc-file-tier-test";
  std::filesystem::create_directories(dir);
  memory::set_file_tier_dir(dir);
  return dir;
}

TEST(AllocatorTiers, TensorsInATierScopeAreCountedInThatTier) {
  const auto before = memory::report();
  {
    memory::TierScope tier(memory::Tier::offload);
    memory::CategoryScope category(memory::Category::optimizer_state);
    Tensor m = Tensor::zeros({100});
    EXPECT_EQ(m.storage()->tier(), memory::Tier::offload);
    const auto mid = memory::report();
    EXPECT_EQ(mid[memory::Tier::offload].current - before[memory::Tier::offload].current, 400);
    EXPECT_EQ(mid.at(memory::Tier::offload, memory::Category::optimizer_state).current -
                  before.at(memory::Tier::offload, memory::Category::optimizer_state).current, 400);
    EXPECT_EQ(mid[memory::Tier::compute].current, before[memory::Tier::compute].current);
    EXPECT_EQ(mid[memory::Category::optimizer_state].current - before[memory::Category::optimizer_state].current, 400);
  }
  EXPECT_EQ(memory::current_tier(), memory::Tier::compute);
  EXPECT_EQ(memory::report()[memory::Tier::offload].current, before[memory::Tier::offload].current);
}

// A file-tier block keeps its values through page_out (they are read back from the file), and
// page_out really drops it from resident memory; resident_kinds() counts its pages as the file
// tier's, not as anonymous memory.
TEST(AllocatorTiers, FileTierKeepsValuesThroughPageOut) {
  const auto dir = file_tier_dir();
  const auto before = memory::report();
  memory::TierScope tier(memory::Tier::file);
  const int64_t n = int64_t{16} << 20;  // 64 MB of f32
  Tensor t = Tensor::empty({n});
  EXPECT_EQ(memory::report()[memory::Tier::file].current - before[memory::Tier::file].current, 4 * n);
  float* p = t.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(i % 1000);
  const int64_t touched = memory::resident_bytes();
  const memory::ResidentKinds touched_kinds = memory::resident_kinds();
  page_out(t);
  const int64_t paged_out = memory::resident_bytes();
  const memory::ResidentKinds paged_out_kinds = memory::resident_kinds();
  EXPECT_GE(touched - paged_out, 4 * n * 9 / 10);
  EXPECT_GE(touched_kinds.file_tier - paged_out_kinds.file_tier, 4 * n * 9 / 10);
  EXPECT_LT(std::abs(touched_kinds.anonymous - paged_out_kinds.anonymous), 4 * n / 10);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += p[i] - static_cast<float>(i % 1000);
  EXPECT_EQ(sum, 0.0);
  // Each block is an unlinked file: nothing is left in the directory.
  EXPECT_TRUE(std::filesystem::is_empty(dir));
}

// zero_() on the file tier punches its whole pages out of the file: they leave resident memory
// with their contents (never written back), and the partial pages at the ends are written.
TEST(AllocatorTiers, FileTierZeroDropsWholePages) {
  const auto dir = file_tier_dir();
  memory::TierScope tier(memory::Tier::file);
  const int64_t n = int64_t{4} << 20;  // 16 MB of f32
  Tensor t = Tensor::full({n}, 3.0);
  const int64_t first = 100, count = n - 300;  // starts and ends inside a page
  const memory::ResidentKinds filled = memory::resident_kinds();
  t.narrow(first, count).zero_();
  const memory::ResidentKinds zeroed = memory::resident_kinds();
  EXPECT_GE(filled.file_tier - zeroed.file_tier, 4 * count * 9 / 10);
  const float* p = t.data<float>();
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += p[i] != (i >= first && i < first + count ? 0.0f : 3.0f);
  EXPECT_EQ(wrong, 0);
  t.zero_();  // whole pages again, read back as zeros
  EXPECT_EQ(std::count(p, p + n, 0.0f), n);
}

// read_block, write_block and copy_block reach the same bytes as the mapping (both are the
// file's page cache) without mapping a page in; outside every block they are an error, not a
// stray copy.
TEST(AllocatorTiers, FileTierBlocksReadAndWriteThroughTheirFile) {
  file_tier_dir();
  memory::TierScope tier(memory::Tier::file);
  const int64_t n = int64_t{4} << 20;  // 16 MB of f32
  Tensor t = Tensor::empty({n});
  float* p = t.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(i % 977);
  page_out(t);
  const int64_t first = 1001, count = n - 3000;  // inside pages at both ends
  std::vector<float> out(static_cast<size_t>(count));
  const memory::ResidentKinds before = memory::resident_kinds();
  memory::read_block(p + first, out.size() * sizeof(float), out.data(), memory::Tier::file);
  for (float& v : out) v = -v;
  memory::write_block(p + first, out.size() * sizeof(float), out.data(), memory::Tier::file);
  EXPECT_LT(memory::resident_kinds().file_tier - before.file_tier, 4 * n / 10) << "pages were mapped in";
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto v = static_cast<float>(i % 977);
    wrong += p[i] != (i >= first && i < first + count ? -v : v);
  }
  EXPECT_EQ(wrong, 0);
  // copy_block from one block's file to another's, also without mapping a page in.
  Tensor other = Tensor::empty({n});
  const memory::ResidentKinds before_copy = memory::resident_kinds();
  memory::copy_block(other.data<float>() + 7, p + first, out.size() * sizeof(float), memory::Tier::file);
  EXPECT_LT(memory::resident_kinds().file_tier - before_copy.file_tier, 4 * n / 10) << "pages were mapped in";
  const float* q = other.data<float>();
  wrong = 0;
  for (int64_t i = 0; i < count; ++i) wrong += q[7 + i] != -static_cast<float>((first + i) % 977);
  EXPECT_EQ(wrong, 0);
  float one = 0;
  EXPECT_NE(test::error_of([&] { memory::read_block(p + n - 1, 2 * sizeof(float), &one, memory::Tier::file); })
                .find("run past their block"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { memory::read_block(&one, sizeof(float), &one, memory::Tier::file); }).find("is in no block"),
            std::string::npos);
}

TEST(AllocatorTiers, FileTierDirectoryIsCheckedUpFront) {
  EXPECT_NE(test::error_of([] { memory::set_file_tier_dir("/nonexistent/dir"); })
                .find("offload_dir '/nonexistent/dir' is not a directory"),
            std::string::npos);
  const auto dir = std::filesystem::temp_directory_path();
  const std::string full = test::error_of([&] { memory::set_file_tier_dir(dir, int64_t{1} << 62); });
  EXPECT_NE(full.find("MiB free, but this rank's offloaded master parameters, gradients and optimizer state need about"),
            std::string::npos) << full;
}

}  // namespace
}  // namespace acc
