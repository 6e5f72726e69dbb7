#pragma once
// acc::Tensor: a shared handle to a contiguous, row-major block of elements. Copying a Tensor
// copies the handle (both name the same tensor, with the same autograd state); a view is a new
// tensor whose elements live at an offset inside another's storage, which is how the
// parameters of a sharded unit live inside one flat buffer.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "acc/memory/allocator.h"
#include "acc/tensor/dtype.h"
#include "acc/util/error.h"

namespace acc {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& shape);
int64_t shape_numel(const Shape& shape);

namespace autograd {
struct AutogradMeta;
class Node;
}  // namespace autograd

// A block of memory from the counting allocator; freed when the last tensor using it goes.
//
// release() returns the block to the allocator early while the Storage object (and every view
// and saved tensor that names it) stays; reacquire() gives it a block of the same size again.
// Tensors read data() at each access, so a sharding strategy can free a unit's gathered
// parameters after its forward although autograd still holds views of them, and refill the
// same storage before the backward that reads them. Touching a released storage's elements is
// an error (data() checks).
class Storage {
 public:
  Storage(size_t nbytes, memory::Category category, memory::Tier tier = memory::Tier::compute);
  // A storage that starts released: it takes memory at its first reacquire().
  struct Unallocated {};
  Storage(Unallocated, size_t nbytes, memory::Category category, memory::Tier tier);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
  void* data() const {
    ACC_CHECK(!released_, "Storage: its ", nbytes_,
              " bytes were released (a sharded unit's parameters outside its gather)");
    return data_;
  }
  size_t nbytes() const { return nbytes_; }
  memory::Category category() const { return category_; }
  memory::Tier tier() const { return tier_; }
  bool released() const { return released_; }
  void release();    // no-op when already released
  void reacquire();  // no-op when holding its block; the contents are undefined

 private:
  void* data_;
  size_t nbytes_;
  memory::Category category_;
  memory::Tier tier_;
  bool released_ = false;
};

// Drops `t`'s whole pages from resident memory when its storage is in the file tier (the
// values stay in the file); nothing otherwise. For streaming offloaded state through a step.
void page_out(const class Tensor& t) noexcept;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // in elements of dtype
  Shape shape;
  DType dtype = DType::f32;
  std::shared_ptr<autograd::AutogradMeta> autograd;  // null until autograd needs it
};

class Tensor {
 public:
  Tensor() = default;  // an undefined tensor; defined() is false

  // --- creation (storage counted under memory::current_category()) ---
  static Tensor empty(const Shape& shape, DType dtype = DType::f32);
  // Shape and dtype but no memory yet (its storage is released; see Storage).
  static Tensor unallocated(const Shape& shape, DType dtype = DType::f32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::f32);
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape,
                            DType dtype = DType::f32);
  static Tensor from_vector_i32(const std::vector<int32_t>& values, const Shape& shape);
  static Tensor from_vector_i64(const std::vector<int64_t>& values, const Shape& shape);
  // Deterministic random values keyed by (seed, name, element index): any slice of the same
  // (seed, name) tensor can be produced without producing the whole (see tensor/random.h).
  static Tensor randn(const Shape& shape, uint64_t seed, std::string_view name, float mean = 0.f,
                      float std = 1.f, DType dtype = DType::f32);
  static Tensor rand_uniform(const Shape& shape, uint64_t seed, std::string_view name,
                             float low = 0.f, float high = 1.f, DType dtype = DType::f32);

  // --- metadata ---
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return shape_numel(shape()); }
  DType dtype() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype()); }
  int64_t storage_offset() const;
  const std::shared_ptr<Storage>& storage() const;
  bool is_same(const Tensor& other) const { return impl_ == other.impl_; }
  bool shares_storage(const Tensor& other) const;
  std::string describe() const;  // "f32[2, 3]"

  // --- raw access ---
  void* raw_data() const;
  template <class T>
  T* data() const {
    ACC_CHECK(defined(), "Tensor::data: tensor is undefined");
    ACC_CHECK(dtype_of<T>::value == dtype(), "Tensor::data: tensor is ", dtype_name(dtype()),
              " but ", dtype_name(dtype_of<T>::value), " was asked for");
    return static_cast<T*>(raw_data());
  }

  // --- views (share storage, no autograd) and copies ---
  Tensor view(const Shape& shape) const;               // one -1 is inferred
  Tensor slice_flat(int64_t offset, const Shape& shape) const;  // elements [offset, offset+numel)
  Tensor narrow(int64_t start, int64_t length) const;  // along dim 0
  Tensor clone() const;                                // fresh storage, same dtype
  Tensor to(DType dtype) const;                        // converted copy (clone if same dtype)
  Tensor& fill_(double value);
  // In the file tier the whole pages become holes: nothing is read, written back or made
  // resident (a gradient buffer cleared each step costs no disk traffic).
  Tensor& zero_();
  Tensor& copy_(const Tensor& src);  // same numel; converts dtype

  // --- element read-out (tests, logging) ---
  float item() const;                    // numel()==1, as f32
  std::vector<float> to_vector() const;  // any floating/integer dtype, as f32
  std::vector<int64_t> to_vector_i64() const;

  // --- autograd (implemented in core/acc/autograd) ---
  bool requires_grad() const;
  Tensor& set_requires_grad(bool requires_grad = true);
  Tensor grad() const;              // undefined until a backward reaches this leaf
  void set_grad(const Tensor& grad);
  std::shared_ptr<autograd::Node> grad_fn() const;
  // Runs backward from this tensor; a scalar may omit the seed gradient (1 is used).
  void backward(const Tensor& seed = Tensor()) const;
  Tensor detach() const;  // same storage, no autograd history
  // Called with the gradient flowing into this tensor during backward; may return a
  // replacement (a defined tensor) or an undefined tensor to keep the gradient as is.
  void register_hook(std::function<Tensor(const Tensor&)> hook);

  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

 private:
  std::shared_ptr<TensorImpl> impl_;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);

}  // namespace acc
