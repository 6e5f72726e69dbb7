#include "acc/models/classifiers.h"

#include "acc/nn/init.h"
#include "acc/nn/layers.h"
#include "acc/ops/ops.h"

namespace acc::models {

ImageClassifier::ImageClassifier(std::string type_name, std::shared_ptr<nn::Sequential> net,
                                 double forward_flops_per_image)
    : Model(std::move(type_name)), forward_flops_(forward_flops_per_image) {
  net_ = register_module("net", std::move(net));
}

ModelOutput ImageClassifier::forward(const data::Batch& batch) {
  ModelOutput out;
  out.logits = (*net_)(batch["images"]);
  if (batch.contains("labels")) out.loss = ops::cross_entropy(out.logits, batch["labels"]);
  return out;
}

double ImageClassifier::train_flops_per_token(int64_t) const { return 3.0 * forward_flops_; }

MLPClassifier::MLPClassifier(int64_t pixels, int64_t hidden, int64_t classes, uint64_t seed)
    : ImageClassifier("MLPClassifier",
                      std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
                          std::make_shared<nn::Flatten>(),
                          std::make_shared<nn::Linear>(pixels, hidden),
                          std::make_shared<nn::GELU>(),
                          std::make_shared<nn::Linear>(hidden, classes)}),
                      2.0 * static_cast<double>(pixels * hidden + hidden * classes)) {
  nn::init_parameters(*this, seed);
}

CNNClassifier::CNNClassifier(int64_t side, int64_t channels1, int64_t channels2, int64_t classes,
                             uint64_t seed)
    : ImageClassifier(
          "CNNClassifier",
          std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
              std::make_shared<nn::Conv2d>(1, channels1, 3, 1, 1),
              std::make_shared<nn::GELU>(),
              std::make_shared<nn::MaxPool2d>(2),
              std::make_shared<nn::Conv2d>(channels1, channels2, 3, 1, 1),
              std::make_shared<nn::GELU>(),
              std::make_shared<nn::MaxPool2d>(2),
              std::make_shared<nn::Flatten>(),
              std::make_shared<nn::Linear>(channels2 * (side / 4) * (side / 4), classes)}),
          // 2 * MACs of the two convolutions (at full and half resolution) and the head.
          2.0 * static_cast<double>(side * side * channels1 * 9 +
                                    (side / 2) * (side / 2) * channels2 * channels1 * 9 +
                                    channels2 * (side / 4) * (side / 4) * classes)) {
  ACC_CHECK(side > 0 && side % 4 == 0, "CNNClassifier: image side ", side,
            " must be a positive multiple of 4 (two 2x2 poolings)");
  nn::init_parameters(*this, seed);
}

}  // namespace acc::models
