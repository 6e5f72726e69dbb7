// embedding: forward copies rows, backward accumulates exactly like the serial reference (same
// addition order, so bit-identical) with repeated ids and at any thread count; bad ids throw.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "acc/kernels/embedding.h"
#include "acc/util/error.h"
#include "kernel_checks.h"
#include "support/test_support.h"

namespace acc::kernels {
namespace {

using test::random_vector;
using Vec = std::vector<float>;

struct Shape {
  int64_t N, V, C;
};
const Shape kShapes[] = {{1, 1, 1}, {7, 5, 7}, {33, 10, 33}, {1000, 50, 768}, {64, 300, 1000}, {5, 3, 4097}};

TEST(Embedding, ForwardAndBackwardMatchReference) {
  uint64_t seed = 1;
  for (const Shape s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "N=" << s.N << " V=" << s.V << " C=" << s.C);
    const Vec table = random_vector(s.V * s.C, ++seed), dout = random_vector(s.N * s.C, ++seed);
    // V < N for most shapes, so ids repeat and backward must sum several rows into one.
    const std::vector<int32_t> ids = test::random_ints(s.N, ++seed, 0, static_cast<int32_t>(s.V));
    Vec out(s.N * s.C), out_ref(s.N * s.C);
    embedding_fwd(table.data(), ids.data(), out.data(), s.N, s.V, s.C);
    ref::embedding_fwd(table.data(), ids.data(), out_ref.data(), s.N, s.V, s.C);
    EXPECT_EQ(out, out_ref);
    Vec dtable = random_vector(s.V * s.C, ++seed), dtable_ref = dtable;  // backward accumulates
    embedding_bwd(dout.data(), ids.data(), dtable.data(), s.N, s.V, s.C);
    ref::embedding_bwd(dout.data(), ids.data(), dtable_ref.data(), s.N, s.V, s.C);
    EXPECT_EQ(dtable, dtable_ref);
  }
}

TEST(Embedding, ForwardFromABf16TableWidensTheRowsItLooksUp) {
  uint64_t seed = 100;
  for (const Shape s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "N=" << s.N << " V=" << s.V << " C=" << s.C);
    const Vec wide = random_vector(s.V * s.C, ++seed);
    std::vector<bfloat16> table(wide.size());
    ref::f32_to_bf16(wide.data(), table.data(), static_cast<int64_t>(wide.size()));
    Vec widened(wide.size());
    ref::bf16_to_f32(table.data(), widened.data(), static_cast<int64_t>(wide.size()));
    const std::vector<int32_t> ids = test::random_ints(s.N, ++seed, 0, static_cast<int32_t>(s.V));
    Vec out(s.N * s.C), out_ref(s.N * s.C), out_f32(s.N * s.C);
    embedding_fwd(table.data(), ids.data(), out.data(), s.N, s.V, s.C);
    ref::embedding_fwd(table.data(), ids.data(), out_ref.data(), s.N, s.V, s.C);
    ref::embedding_fwd(widened.data(), ids.data(), out_f32.data(), s.N, s.V, s.C);
    EXPECT_EQ(out, out_ref);
    EXPECT_EQ(out, out_f32);  // the same as looking up in the table widened whole
  }
}

TEST(Embedding, BackwardSumsRepeatedIds) {
  // ids {2, 0, 2}: row 2 of dtable gets dout rows 0 and 2, row 1 nothing.
  const int32_t ids[3] = {2, 0, 2};
  const Vec dout = {1, 2, 3, 4, 5, 6};
  Vec dtable(6, 0.5f);
  embedding_bwd(dout.data(), ids, dtable.data(), 3, 3, 2);
  EXPECT_EQ(dtable, (Vec{3.5f, 4.5f, 0.5f, 0.5f, 6.5f, 8.5f}));
}

TEST(Embedding, BackwardDoesNotDependOnThreadCount) {
  const Shape s{2000, 20, 768};
  const Vec dout = random_vector(s.N * s.C, 3, 10.f);
  const std::vector<int32_t> ids = test::random_ints(s.N, 4, 0, static_cast<int32_t>(s.V));
  Vec one(s.V * s.C, 0.f), two(s.V * s.C, 0.f);
  {
    test::ScopedThreads t(1);
    embedding_bwd(dout.data(), ids.data(), one.data(), s.N, s.V, s.C);
  }
  {
    test::ScopedThreads t(2);
    embedding_bwd(dout.data(), ids.data(), two.data(), s.N, s.V, s.C);
  }
  EXPECT_EQ(one, two);
}

TEST(Embedding, NoIdsIsANoOp) {
  const Vec table(6, 1.f);
  Vec dtable(6, 2.f);
  embedding_fwd(table.data(), nullptr, nullptr, 0, 3, 2);
  embedding_bwd(nullptr, nullptr, dtable.data(), 0, 3, 2);
  EXPECT_EQ(dtable, Vec(6, 2.f));
}

TEST(Embedding, OutOfRangeIdNamesPositionAndValue) {
  const Vec table(3 * 4, 1.f);
  Vec out(4 * 4);
  for (const int32_t bad : {-1, 3, 1000}) {
    const int32_t ids[4] = {0, 2, bad, 1};
    for (const bool backward : {false, true}) {
      try {
        if (backward) embedding_bwd(out.data(), ids, out.data(), 4, 3, 4);
        else embedding_fwd(table.data(), ids, out.data(), 4, 3, 4);
        FAIL() << "expected acc::Error for id " << bad;
      } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find(backward ? "embedding_bwd" : "embedding_fwd"), std::string::npos) << msg;
        EXPECT_NE(msg.find("position 2 is " + std::to_string(bad)), std::string::npos) << msg;
        EXPECT_NE(msg.find("V=3"), std::string::npos) << msg;
      }
    }
  }
}

}  // namespace
}  // namespace acc::kernels
