// memory::huge_pages: large blocks start on a 2 MiB boundary and are advised for transparent
// huge pages; the allocator takes its large blocks from there, rounded up to whole huge pages
// (so no block ends in 4 KiB pages); ACC_HUGE_PAGES is read as 0 or 1 and nothing else.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "acc/memory/allocator.h"
#include "acc/memory/huge_pages.h"
#include "acc/util/error.h"

namespace acc {
namespace {

using memory::huge_pages::kBytes;

// The mapping that starts at `at` in /proc/self/smaps: its end and VmFlags (0 and "" when none
// starts there).
struct Mapping {
  uintptr_t end = 0;
  std::string flags;
};
Mapping mapping_at(uintptr_t at) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  Mapping found;
  bool inside = false;
  while (std::getline(smaps, line)) {
    const auto dash = line.find('-');
    if (dash != std::string::npos && dash > 0 && line.find(' ') > dash && std::isxdigit(line[0])) {
      inside = std::stoull(line.substr(0, dash), nullptr, 16) == at;
      if (inside) found.end = std::stoull(line.substr(dash + 1, line.find(' ') - dash - 1), nullptr, 16);
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      found.flags = line;
      return found;
    }
  }
  return {};
}
std::string flags_of_mapping_at(uintptr_t at) { return mapping_at(at).flags; }

bool has_flag(const std::string& flags, const std::string& flag) {
  std::istringstream words(flags);
  std::string w;
  while (words >> w)
    if (w == flag) return true;
  return false;
}

bool kernel_has_transparent_huge_pages() {
  return std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled");
}

TEST(HugePages, BlocksStartOnAHugePageAndAreAdvisedWhole) {
  if (!kernel_has_transparent_huge_pages()) GTEST_SKIP() << "this kernel has no transparent huge pages";
  EXPECT_EQ(memory::huge_pages::round_up(2 * kBytes), 2 * kBytes);
  EXPECT_EQ(memory::huge_pages::round_up(2 * kBytes + 4096), 3 * kBytes);
  const size_t bytes = 2 * kBytes;
  void* block = memory::huge_pages::map(bytes);
  ASSERT_NE(block, nullptr);
  const auto at = reinterpret_cast<uintptr_t>(block);
  EXPECT_EQ(at % kBytes, 0u);
  std::memset(block, 7, bytes);  // all of it is usable
  EXPECT_EQ(static_cast<unsigned char*>(block)[bytes - 1], 7);
  const Mapping m = mapping_at(at);
  EXPECT_TRUE(has_flag(m.flags, "hg")) << m.flags;
  EXPECT_GE(m.end, at + bytes);
  memory::huge_pages::unmap(block, bytes);
  EXPECT_EQ(flags_of_mapping_at(at), "");  // nothing left mapped at the block
}

TEST(HugePages, TheAllocatorTakesWholeHugePagesAndGivesThemBack) {
  if (!kernel_has_transparent_huge_pages()) GTEST_SKIP() << "this kernel has no transparent huge pages";
  ASSERT_TRUE(memory::huge_pages::serves(3 * kBytes)) << "ACC_HUGE_PAGES=0 in the test's environment";
  EXPECT_FALSE(memory::huge_pages::serves(kBytes - 4096));
  memory::release_cached();  // a block of this size kept from before would be handed out again
  // Two huge pages and 20 KiB: the block is three whole huge pages, all of them advised (a last
  // partial one in 4 KiB pages would cost as much to touch as the rest).
  const size_t bytes = 2 * kBytes + 5 * 4096;
  const int64_t rounding_before = memory::report().rounding.current;
  void* p = memory::allocate(bytes, memory::Category::other);
  // The rounding is counted, beside the categories (which count what was asked for).
  EXPECT_EQ(memory::report().rounding.current - rounding_before, static_cast<int64_t>(3 * kBytes - bytes));
  const auto at = reinterpret_cast<uintptr_t>(p);
  EXPECT_EQ(at % kBytes, 0u);
  const Mapping m = mapping_at(at);
  EXPECT_TRUE(has_flag(m.flags, "hg")) << m.flags;
  EXPECT_GE(m.end, at + 3 * kBytes) << "the block's last huge page is not in its advised mapping";
  memory::deallocate(p, bytes, memory::Category::other);  // kept by the cache
  EXPECT_EQ(memory::report().rounding.current, rounding_before);
  if (!std::getenv("ACC_ALLOC_CACHE_MB")) {  // (a capacity set from outside may keep nothing)
    // Any request that rounds to the same three huge pages gets the kept block back.
    void* again = memory::allocate(3 * kBytes - 4096, memory::Category::other);
    EXPECT_EQ(again, p);
    memory::deallocate(again, 3 * kBytes - 4096, memory::Category::other);
  }
  memory::release_cached();  // unmapped
  EXPECT_EQ(flags_of_mapping_at(at), "");
}

TEST(HugePages, TheVariableIsZeroOrOne) {
  EXPECT_TRUE(memory::huge_pages::enabled(nullptr));
  EXPECT_TRUE(memory::huge_pages::enabled(""));
  EXPECT_TRUE(memory::huge_pages::enabled("1"));
  EXPECT_FALSE(memory::huge_pages::enabled("0"));
  try {
    memory::huge_pages::enabled("yes");
    FAIL() << "ACC_HUGE_PAGES=yes was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ACC_HUGE_PAGES='yes' is not 0 or 1"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace acc
