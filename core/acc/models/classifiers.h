#pragma once
// Image classifiers for MNIST-style data: batch["images"] f32 [B, 1, H, W] -> logits
// [B, classes], loss against batch["labels"] i32 [B]. Both keep their layers in a Sequential
// child "net" (net.0.weight, ...), so the parameter names say where each layer sits.
#include <cstdint>
#include <memory>

#include "acc/models/model.h"
#include "acc/nn/containers.h"

namespace acc::models {

class ImageClassifier : public Model {
 public:
  ModelOutput forward(const data::Batch& batch) override;
  double train_flops_per_token(int64_t seq_len) const override;  // per image; seq_len unused

 protected:
  ImageClassifier(std::string type_name, std::shared_ptr<nn::Sequential> net,
                  double forward_flops_per_image);

 private:
  std::shared_ptr<nn::Sequential> net_;
  double forward_flops_;
};

// Flatten - Linear(pixels, hidden) - GELU - Linear(hidden, classes).
class MLPClassifier : public ImageClassifier {
 public:
  MLPClassifier(int64_t pixels = 28 * 28, int64_t hidden = 256, int64_t classes = 10,
                uint64_t seed = 0);
};

// (Conv3x3 - GELU - MaxPool2) x 2 - Flatten - Linear, for square images whose side divides by 4.
class CNNClassifier : public ImageClassifier {
 public:
  CNNClassifier(int64_t side = 28, int64_t channels1 = 16, int64_t channels2 = 32,
                int64_t classes = 10, uint64_t seed = 0);
};

}  // namespace acc::models
