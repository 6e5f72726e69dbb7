// Deferred initialisation: a model built inside nn::DeferredInit holds no parameter memory, and
// whatever is later made from its records (the whole parameter, or any slice of it) equals
// what a normal build writes, bit for bit.
#include <gtest/gtest.h>

#include "acc/memory/allocator.h"
#include "acc/models/classifiers.h"
#include "acc/models/gpt2.h"
#include "acc/models/llama.h"
#include "acc/nn/deferred_init.h"
#include "support/test_support.h"

namespace acc {
namespace {

template <class M, class... Args>
std::shared_ptr<M> build(bool deferred, Args... args) {
  nn::DeferredInit scope(deferred);
  return std::make_shared<M>(args...);
}

// A deferred model, then materialised, against the same model built normally.
template <class M, class... Args>
void expect_materialises_as_built(Args... args) {
  auto plain = build<M>(false, args...);
  const int64_t before = memory::report()[memory::Category::parameters].current;
  auto deferred = build<M>(true, args...);
  EXPECT_EQ(memory::report()[memory::Category::parameters].current, before) << "no memory while deferred";
  EXPECT_TRUE(nn::has_deferred_parameters(*deferred));
  const auto expected = plain->named_parameters();
  const auto params = deferred->named_parameters();
  ASSERT_EQ(params.size(), expected.size());
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(nn::is_deferred(params[i].second)) << params[i].first;
    // Any slice made alone equals the same slice of the full build.
    const Tensor& p = params[i].second;
    const int64_t first = p.numel() / 3, count = p.numel() - first - p.numel() / 5;
    std::vector<float> part(static_cast<size_t>(count));
    nn::fill_part(p, first, count, part.data());
    const std::vector<float> all = expected[i].second.to_vector();
    EXPECT_EQ(part, std::vector<float>(all.begin() + first, all.begin() + first + count)) << params[i].first;
  }
  nn::materialize(*deferred);
  EXPECT_FALSE(nn::has_deferred_parameters(*deferred));
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_EQ(deferred->named_parameters()[i].second.to_vector(), expected[i].second.to_vector())
        << params[i].first;
}

TEST(DeferredInit, Gpt2MaterialisesAsBuilt) { expect_materialises_as_built<models::GPT2>(models::GPT2Config::tiny(), 3); }

TEST(DeferredInit, LlamaMaterialisesAsBuilt) { expect_materialises_as_built<models::Llama>(models::LlamaConfig::tiny(), 3); }

TEST(DeferredInit, ClassifierMaterialisesAsBuilt) {
  expect_materialises_as_built<models::MLPClassifier>(int64_t{64}, int64_t{32}, int64_t{10}, uint64_t{5});
}

TEST(DeferredInit, ReadingADeferredParameterIsAnError) {
  auto model = build<models::GPT2>(true, models::GPT2Config::tiny(), 0);
  const Tensor w = model->parameter("transformer.wte.weight");
  EXPECT_FALSE(test::error_of([&] { w.to_vector(); }).empty());
  EXPECT_NE(test::error_of([&] { nn::fill_part(Tensor::zeros({4}), 0, 4, nullptr); }).find("is not a deferred parameter"),
            std::string::npos);
}

}  // namespace
}  // namespace acc
