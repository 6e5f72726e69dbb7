#pragma once
// Containers whose children are named "0", "1", ... in order.
#include <initializer_list>
#include <memory>

#include "acc/nn/module.h"

namespace acc::nn {

class ModuleList : public Module {
 public:
  ModuleList() : Module("ModuleList") {}
  explicit ModuleList(std::initializer_list<std::shared_ptr<Module>> modules);
  void append(std::shared_ptr<Module> module);
  size_t size() const { return children().size(); }
  Module& operator[](size_t i) const;

 protected:
  explicit ModuleList(std::string type_name) : Module(std::move(type_name)) {}
};

// Calls its children in order.
class Sequential : public ModuleList {
 public:
  Sequential() : ModuleList("Sequential") {}
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);
  Tensor forward(const Tensor& x) override;
};

}  // namespace acc::nn
