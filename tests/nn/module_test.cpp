// nn::Module: names, call boundary (hooks, wrapper), parameter replacement, modes, init.
#include <gtest/gtest.h>

#include <cmath>

#include "acc/autograd/function.h"
#include "acc/nn/nn.h"
#include "acc/ops/ops.h"
#include "support/test_support.h"

namespace acc {
namespace {

// A two-level model shaped like a transformer stack: h.<i>.mlp.fc1.weight, ...
class Block : public nn::Module {
 public:
  Block() : Module("Block") {
    ln = register_module("ln", std::make_shared<nn::LayerNorm>(4));
    mlp = register_module("mlp", std::make_shared<nn::MLP>(4, 8, 4));
  }
  Tensor forward(const Tensor& x) override { return ops::add(x, (*mlp)((*ln)(x))); }
  std::shared_ptr<nn::LayerNorm> ln;
  std::shared_ptr<nn::MLP> mlp;
};

class Model : public nn::Module {
 public:
  Model() : Module("Model") {
    h = register_module("h", std::make_shared<nn::ModuleList>());
    for (int i = 0; i < 2; ++i) h->append(std::make_shared<Block>());
    head = register_module("head", std::make_shared<nn::Linear>(4, 3, false));
  }
  Tensor forward(const Tensor& x) override {
    Tensor y = x;
    for (size_t i = 0; i < h->size(); ++i) y = (*h)[i](y);
    return (*head)(y);
  }
  std::shared_ptr<nn::ModuleList> h;
  std::shared_ptr<nn::Linear> head;
};

std::vector<std::string> names(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::vector<std::string> out;
  for (const auto& [n, _] : named) out.push_back(n);
  return out;
}

TEST(Module, QualifiedNamesAndTypes) {
  Model m;
  const auto params = names(m.named_parameters());
  const std::vector<std::string> expect = {
      "h.0.ln.weight", "h.0.ln.bias", "h.0.mlp.fc1.weight", "h.0.mlp.fc1.bias", "h.0.mlp.fc2.weight",
      "h.0.mlp.fc2.bias", "h.1.ln.weight", "h.1.ln.bias", "h.1.mlp.fc1.weight", "h.1.mlp.fc1.bias",
      "h.1.mlp.fc2.weight", "h.1.mlp.fc2.bias", "head.weight"};
  EXPECT_EQ(params, expect);
  EXPECT_EQ(m.parameters().size(), expect.size());
  std::vector<std::string> blocks;
  for (auto& [name, mod] : m.named_modules())
    if (mod->type_name() == "Block") blocks.push_back(name);
  EXPECT_EQ(blocks, (std::vector<std::string>{"h.0", "h.1"}));
  EXPECT_EQ(m.named_modules()[0].first, "");
  EXPECT_EQ(m.parameter("h.1.mlp.fc2.weight").shape(), (Shape{4, 8}));
  for (const auto& p : m.parameters()) EXPECT_TRUE(p.requires_grad());
}

TEST(Module, ParametersAreCountedAsParameters) {
  const int64_t before = memory::report()[memory::Category::parameters].current;
  {
    nn::Linear lin(100, 10);
    EXPECT_EQ(memory::report()[memory::Category::parameters].current - before, (1000 + 10) * 4);
  }
  EXPECT_EQ(memory::report()[memory::Category::parameters].current, before);
}

TEST(Module, BadNamesAndLookupsAreErrors) {
  Model m;
  EXPECT_THROW(m.register_parameter("a.b", Tensor::zeros({1})), Error);
  EXPECT_THROW(m.register_module("head", std::make_shared<nn::GELU>()), Error);
  EXPECT_THROW(m.parameter("h.7.ln.weight"), Error);
  try {
    m.parameter("head.bias");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight"), std::string::npos) << e.what();
  }
  EXPECT_THROW(nn::ModuleList()(Tensor::zeros({1})), Error);
}

TEST(Module, HooksRunInOrderAndCanReplaceOutputAndBeRemoved) {
  nn::Linear lin(3, 2);
  std::vector<std::string> calls;
  auto pre = lin.register_forward_pre_hook([&](nn::Module& m, const Tensor& x) {
    calls.push_back("pre " + m.type_name() + " " + x.describe());
  });
  auto post = lin.register_forward_hook([&](nn::Module&, const Tensor&, const Tensor& out) {
    calls.push_back("post");
    return ops::scale(out, 0.0);
  });
  Tensor y = lin(Tensor::full({5, 3}, 1.0));
  EXPECT_EQ(calls, (std::vector<std::string>{"pre Linear f32[5, 3]", "post"}));
  EXPECT_EQ(y.to_vector(), std::vector<float>(10, 0.f));
  pre.remove();
  post.remove();
  post.remove();  // harmless
  calls.clear();
  EXPECT_NE(lin(Tensor::full({1, 3}, 1.0)).to_vector(), std::vector<float>(2, 0.f));
  EXPECT_TRUE(calls.empty());
}

TEST(Module, CallWrapperRunsAroundHooksAndForward) {
  Model m;
  std::vector<std::string> calls;
  for (auto& [name, mod] : m.named_modules()) {
    if (mod->type_name() != "Block") continue;
    mod->register_forward_pre_hook([&calls, n = name](nn::Module&, const Tensor&) { calls.push_back("pre " + n); });
    mod->add_call_wrapper([&calls, n = name](nn::Module&, const Tensor& x, const nn::Module::Inner& inner) {
      calls.push_back("gather " + n);
      Tensor out = autograd::checkpoint(inner, x);  // what a strategy with checkpointing does
      calls.push_back("free " + n);
      return out;
    });
  }
  auto x = test::random_vector(2 * 4, 1);
  Tensor loss = ops::sum(m(Tensor::from_vector(x, {2, 4})));
  EXPECT_EQ(calls, (std::vector<std::string>{"gather h.0", "pre h.0", "free h.0", "gather h.1",
                                             "pre h.1", "free h.1"}));
  calls.clear();
  loss.backward();  // recomputation goes through the inner call again (the hooks, not the wrapper)
  EXPECT_EQ(calls, (std::vector<std::string>{"pre h.1", "pre h.0"}));
  for (auto& [name, p] : m.named_parameters()) EXPECT_TRUE(p.grad().defined()) << name;
}

TEST(Module, CallWrappersComposeFirstAddedOutermostAndHandlesRemoveThem) {
  nn::Linear lin(2, 2);
  std::vector<std::string> calls;
  auto wrapper = [&calls](std::string name) {
    return [&calls, name](nn::Module&, const Tensor& x, const nn::Module::Inner& inner) {
      calls.push_back(name + " in");
      Tensor y = inner(x);
      calls.push_back(name + " out");
      return y;
    };
  };
  auto outer = lin.add_call_wrapper(wrapper("fsdp"));
  auto inner = lin.add_call_wrapper(wrapper("tp"));
  lin(Tensor::zeros({1, 2}));
  EXPECT_EQ(calls, (std::vector<std::string>{"fsdp in", "tp in", "tp out", "fsdp out"}));
  calls.clear();
  outer.remove();
  lin(Tensor::zeros({1, 2}));
  EXPECT_EQ(calls, (std::vector<std::string>{"tp in", "tp out"}));
  inner.remove();
  EXPECT_FALSE(lin.has_call_wrapper());
}

TEST(Module, SetParameterSwapsInAViewOfAFlatBuffer) {
  Model m;
  const auto named = m.named_parameters();
  int64_t total = 0;
  for (const auto& [_, p] : named) total += p.numel();
  Tensor flat = Tensor::zeros({total});
  int64_t offset = 0;
  for (const auto& [name, p] : named) {
    Tensor view = flat.slice_flat(offset, p.shape());
    view.copy_(p);
    m.set_parameter(name, view);
    offset += p.numel();
  }
  for (const auto& [name, p] : m.named_parameters()) {
    EXPECT_TRUE(p.shares_storage(flat)) << name;
    EXPECT_TRUE(p.requires_grad()) << name;
  }
  ops::sum(m(Tensor::full({2, 4}, 0.5))).backward();
  EXPECT_TRUE(m.parameter("head.weight").grad().defined());
  EXPECT_THROW(m.set_parameter("head.weight", Tensor::zeros({2, 2})), Error);
  EXPECT_THROW(m.set_parameter("head.nothing", Tensor::zeros({3, 4})), Error);
}

TEST(Module, TrainEvalZeroGradApply) {
  Model m;
  m.eval();
  for (auto& [_, mod] : m.named_modules()) EXPECT_FALSE(mod->is_training());
  m.train();
  EXPECT_TRUE(m.h->is_training());
  ops::sum(m(Tensor::full({1, 4}, 1.0))).backward();
  Tensor g = m.head->param("weight").grad();
  m.zero_grad(false);
  EXPECT_TRUE(g.is_same(m.head->param("weight").grad()));
  EXPECT_EQ(g.to_vector(), std::vector<float>(12, 0.f));
  m.zero_grad();
  EXPECT_FALSE(m.head->param("weight").grad().defined());
  int count = 0;
  m.apply([&](nn::Module&) { ++count; });
  EXPECT_EQ(count, static_cast<int>(m.named_modules().size()));
}

TEST(Init, SameSeedAndNameGiveSameValuesWhereverTheModuleLives) {
  Model a, b;
  nn::init_parameters(a, 42);
  nn::init_parameters(b, 42);
  EXPECT_EQ(a.parameter("h.1.mlp.fc1.weight").to_vector(), b.parameter("h.1.mlp.fc1.weight").to_vector());
  EXPECT_NE(a.parameter("h.0.mlp.fc1.weight").to_vector(), a.parameter("h.1.mlp.fc1.weight").to_vector());
  // A lone Linear initialised under the same qualified name matches the one inside the model.
  auto fc = std::make_shared<nn::Linear>(4, 8);
  fc->reset_parameters(42, "h.1.mlp.fc1.");
  EXPECT_EQ(fc->param("weight").to_vector(), a.parameter("h.1.mlp.fc1.weight").to_vector());
  // PyTorch-like rules: Linear uniform within 1/sqrt(fan_in), norms ones and zeros.
  for (float v : a.parameter("h.0.mlp.fc2.weight").to_vector()) EXPECT_LE(std::fabs(v), 1.f / std::sqrt(8.f));
  EXPECT_EQ(a.parameter("h.0.ln.weight").to_vector(), std::vector<float>(4, 1.f));
  EXPECT_EQ(a.parameter("h.0.ln.bias").to_vector(), std::vector<float>(4, 0.f));
  Tensor expect = Tensor::rand_uniform({3, 4}, 42, "head.weight", -0.5f, 0.5f);
  EXPECT_EQ(a.parameter("head.weight").to_vector(), expect.to_vector());
}

}  // namespace
}  // namespace acc

namespace acc {
namespace {

TEST(Module, TiedWeightsAreListedOnceAndStayTiedWhenReplaced) {
  // GPT-2 style: the output head reuses the token embedding table.
  nn::Sequential m;
  auto wte = std::make_shared<nn::Embedding>(6, 4);
  auto head = std::make_shared<nn::Linear>(4, 6, false);
  m.append(wte);
  m.append(head);
  head->set_parameter("weight", wte->param("weight"));
  EXPECT_TRUE(head->param("weight").is_same(wte->param("weight")));
  const auto named = m.named_parameters();
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].first, "0.weight");
  Tensor flat = Tensor::zeros({24});
  m.set_parameter("0.weight", flat.view({6, 4}));
  EXPECT_TRUE(head->param("weight").shares_storage(flat));
  EXPECT_TRUE(head->param("weight").is_same(wte->param("weight")));
}

}  // namespace
}  // namespace acc
