// memory::Prefault: makes fresh anonymous pages present on its own thread, in order, without
// changing a byte (a reader may be writing them at the same time), and stops when destroyed.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "acc/memory/prefault.h"

namespace acc {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// A fresh anonymous mapping, unmapped at the end.
struct Mapping {
  explicit Mapping(size_t bytes) : bytes(bytes) {
    data = static_cast<char*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    EXPECT_NE(data, MAP_FAILED);
  }
  ~Mapping() { munmap(data, bytes); }
  // Pages of [at, at + n) present now.
  size_t present(size_t at, size_t n) const {
    std::vector<unsigned char> in(n / kPage);
    EXPECT_EQ(mincore(data + at, n, in.data()), 0);
    size_t count = 0;
    for (unsigned char c : in) count += c & 1;
    return count;
  }
  char* data;
  size_t bytes;
};

bool wait_for(const memory::Prefault& p, size_t bytes) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (p.done() < bytes && std::chrono::steady_clock::now() < until)
    std::this_thread::yield();
  return p.done() >= bytes;
}

TEST(Prefault, MakesTheRegionsPagesPresentAndLeavesTheirBytes) {
  Mapping m(64 * kPage);
  std::memcpy(m.data + 5 * kPage, "kept", 4);  // written before: must survive
  ASSERT_EQ(m.present(10 * kPage, 40 * kPage), 0u);
  {
    // Two regions, each starting and ending inside a page: their whole pages are made present.
    memory::Prefault p({{m.data + 10 * kPage + 100, 20 * kPage - 200}, {m.data + 3 * kPage + 1, 2 * kPage + 10}});
    ASSERT_TRUE(wait_for(p, 23 * kPage));
  }
  EXPECT_EQ(m.present(10 * kPage, 20 * kPage), 20u);
  EXPECT_EQ(m.present(3 * kPage, 3 * kPage), 3u);
  EXPECT_EQ(m.present(30 * kPage, 30 * kPage), 0u);  // nothing outside the regions
  EXPECT_EQ(std::memcmp(m.data + 5 * kPage, "kept", 4), 0);
  for (size_t at = 10 * kPage; at < 30 * kPage; at += 997) ASSERT_EQ(m.data[at], 0);
}

TEST(Prefault, StopsWhenDestroyed) {
  // 4 GiB of address space, never touched by the test: destroying at once must not wait for it.
  const size_t bytes = size_t{4} << 30;
  Mapping m(bytes);
  const auto t0 = std::chrono::steady_clock::now();
  size_t done = 0;
  {
    memory::Prefault p({{m.data, bytes}});
    done = p.done();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  EXPECT_LT(done, bytes);
  EXPECT_LT(m.present(0, bytes) * kPage, bytes / 2);
}

}  // namespace
}  // namespace acc
