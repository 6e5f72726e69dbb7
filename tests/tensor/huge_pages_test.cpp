// memory::huge_pages: large blocks start on a 2 MiB boundary, the huge pages they wholly cover
// are advised for transparent huge pages and nothing else is; the allocator takes its large
// blocks from there; ACC_HUGE_PAGES is read as 0 or 1 and nothing else.
#include <gtest/gtest.h>

#include <cstdint>
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

// The VmFlags of the mapping that starts at `at` in /proc/self/smaps ("" when none starts there).
std::string flags_of_mapping_at(uintptr_t at) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    const auto dash = line.find('-');
    if (dash != std::string::npos && dash > 0 && line.find(' ') > dash && std::isxdigit(line[0])) {
      inside = std::stoull(line.substr(0, dash), nullptr, 16) == at;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

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

TEST(HugePages, BlocksStartOnAHugePageAndOnlyWholeHugePagesAreAdvised) {
  if (!kernel_has_transparent_huge_pages()) GTEST_SKIP() << "this kernel has no transparent huge pages";
  const size_t bytes = 2 * kBytes + 5 * 4096;  // two whole huge pages and a tail of 4 KiB pages
  void* block = memory::huge_pages::map(bytes);
  ASSERT_NE(block, nullptr);
  const auto at = reinterpret_cast<uintptr_t>(block);
  EXPECT_EQ(at % kBytes, 0u);
  std::memset(block, 7, bytes);  // all of it is usable
  EXPECT_EQ(static_cast<unsigned char*>(block)[bytes - 1], 7);
  EXPECT_TRUE(has_flag(flags_of_mapping_at(at), "hg")) << flags_of_mapping_at(at);
  const std::string tail = flags_of_mapping_at(at + 2 * kBytes);
  EXPECT_FALSE(tail.empty()) << "the tail should be a mapping of its own";
  EXPECT_FALSE(has_flag(tail, "hg")) << tail;
  memory::huge_pages::unmap(block, bytes);
  EXPECT_EQ(flags_of_mapping_at(at), "");  // nothing left mapped at the block
}

TEST(HugePages, TheAllocatorTakesLargeBlocksFromThemAndGivesThemBack) {
  if (!kernel_has_transparent_huge_pages()) GTEST_SKIP() << "this kernel has no transparent huge pages";
  ASSERT_TRUE(memory::huge_pages::serves(3 * kBytes)) << "ACC_HUGE_PAGES=0 in the test's environment";
  EXPECT_FALSE(memory::huge_pages::serves(kBytes - 4096));
  memory::release_cached();  // a block of this size kept from before would be handed out again
  void* p = memory::allocate(3 * kBytes, memory::Category::other);
  const auto at = reinterpret_cast<uintptr_t>(p);
  EXPECT_EQ(at % kBytes, 0u);
  EXPECT_TRUE(has_flag(flags_of_mapping_at(at), "hg")) << flags_of_mapping_at(at);
  memory::deallocate(p, 3 * kBytes, memory::Category::other);  // kept by the cache
  memory::release_cached();                                    // unmapped
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
