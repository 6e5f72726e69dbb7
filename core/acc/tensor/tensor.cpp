#include "acc/tensor/tensor.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "acc/kernels/convert.h"
#include "acc/tensor/random.h"

namespace acc {

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Storage::Storage(size_t nbytes, memory::Category category, memory::Tier tier)
    : data_(memory::allocate(nbytes, category, tier)), nbytes_(nbytes), category_(category), tier_(tier) {}

Storage::Storage(Unallocated, size_t nbytes, memory::Category category, memory::Tier tier)
    : data_(nullptr), nbytes_(nbytes), category_(category), tier_(tier), released_(true) {}

Storage::~Storage() {
  if (!released_) memory::deallocate(data_, nbytes_, category_, tier_);
}

void Storage::release() {
  if (released_) return;
  memory::deallocate(data_, nbytes_, category_, tier_);
  data_ = nullptr;
  released_ = true;
}

void Storage::reacquire() {
  if (!released_) return;
  data_ = memory::allocate(nbytes_, category_, tier_);
  released_ = false;
}

void page_out(const Tensor& t) noexcept {
  if (!t.defined() || t.storage()->released() || t.storage()->tier() != memory::Tier::file) return;
  memory::page_out(t.raw_data(), t.nbytes(), memory::Tier::file);  // held: raw_data cannot throw
}

namespace {

void check_shape(const Shape& shape, const char* op) {
  for (int64_t d : shape)
    ACC_CHECK(d >= 0, op, ": negative dimension in shape ", shape_str(shape));
}

Tensor make_view(const Tensor& base, int64_t offset, const Shape& shape) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->offset = offset;
  impl->shape = shape;
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

// Reads element i of a tensor of any dtype as double (slow path for read-out and conversion).
double load(const void* data, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::f32: return static_cast<const float*>(data)[i];
    case DType::bf16: return kernels::to_f32(static_cast<const bfloat16*>(data)[i]);
    case DType::i32: return static_cast<const int32_t*>(data)[i];
    case DType::i64: return static_cast<double>(static_cast<const int64_t*>(data)[i]);
  }
  return 0;
}

// A tensor of T's dtype holding exactly `values`.
template <class T>
Tensor from_values(const std::vector<T>& values, const Shape& shape, const char* op) {
  ACC_CHECK(static_cast<int64_t>(values.size()) == shape_numel(shape), op, ": ", values.size(),
            " values do not fill shape ", shape_str(shape));
  Tensor t = Tensor::empty(shape, dtype_of<T>::value);
  if (!values.empty())  // an empty vector's data() may be null, which memcpy must not get
    std::memcpy(t.raw_data(), values.data(), values.size() * sizeof(T));
  return t;
}

void store(void* data, DType dtype, int64_t i, double v) {
  switch (dtype) {
    case DType::f32: static_cast<float*>(data)[i] = static_cast<float>(v); break;
    case DType::bf16: static_cast<bfloat16*>(data)[i] = kernels::to_bf16(static_cast<float>(v)); break;
    case DType::i32: static_cast<int32_t*>(data)[i] = static_cast<int32_t>(v); break;
    case DType::i64: static_cast<int64_t*>(data)[i] = static_cast<int64_t>(v); break;
  }
}

// A tensor of its own new storage, in this thread's category and tier; `storage_args` come
// before the size (Storage::Unallocated{} for one without memory yet).
template <class... StorageArgs>
Tensor new_tensor(const char* op, const Shape& shape, DType dtype, StorageArgs... storage_args) {
  check_shape(shape, op);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(storage_args..., static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype),
                                            memory::current_category(), memory::current_tier());
  impl->shape = shape;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype) { return new_tensor("Tensor::empty", shape, dtype); }

Tensor Tensor::unallocated(const Shape& shape, DType dtype) {
  return new_tensor("Tensor::unallocated", shape, dtype, Storage::Unallocated{});
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  // A new file-tier block reads as zeros already; writing them would make it all resident.
  if (t.storage()->tier() != memory::Tier::file) std::memset(t.raw_data(), 0, t.nbytes());
  return t;
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  return empty(shape, dtype).fill_(value);
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape, DType dtype) {
  Tensor t = from_values(values, shape, "Tensor::from_vector");
  return dtype == DType::f32 ? t : t.to(dtype);
}

Tensor Tensor::from_vector_i32(const std::vector<int32_t>& values, const Shape& shape) {
  return from_values(values, shape, "Tensor::from_vector_i32");
}

Tensor Tensor::from_vector_i64(const std::vector<int64_t>& values, const Shape& shape) {
  return from_values(values, shape, "Tensor::from_vector_i64");
}

Tensor Tensor::randn(const Shape& shape, uint64_t seed, std::string_view name, float mean, float std,
                     DType dtype) {
  Tensor t = empty(shape, DType::f32);
  random::fill_normal(t.data<float>(), 0, t.numel(), random::stream_key(seed, name), mean, std);
  return dtype == DType::f32 ? t : t.to(dtype);
}

Tensor Tensor::rand_uniform(const Shape& shape, uint64_t seed, std::string_view name, float low,
                            float high, DType dtype) {
  Tensor t = empty(shape, DType::f32);
  random::fill_uniform(t.data<float>(), 0, t.numel(), random::stream_key(seed, name), low, high);
  return dtype == DType::f32 ? t : t.to(dtype);
}

const Shape& Tensor::shape() const {
  ACC_CHECK(defined(), "Tensor::shape: tensor is undefined");
  return impl_->shape;
}

int64_t Tensor::size(int64_t d) const {
  const int64_t n = dim();
  ACC_CHECK(d >= -n && d < n, "Tensor::size: dimension ", d, " out of range for ", describe());
  return shape()[static_cast<size_t>(d < 0 ? d + n : d)];
}

DType Tensor::dtype() const {
  ACC_CHECK(defined(), "Tensor::dtype: tensor is undefined");
  return impl_->dtype;
}

int64_t Tensor::storage_offset() const { return defined() ? impl_->offset : 0; }

const std::shared_ptr<Storage>& Tensor::storage() const {
  ACC_CHECK(defined(), "Tensor::storage: tensor is undefined");
  return impl_->storage;
}

bool Tensor::shares_storage(const Tensor& other) const {
  return defined() && other.defined() && impl_->storage == other.impl_->storage;
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined";
  return std::string(dtype_name(dtype())) + shape_str(shape());
}

void* Tensor::raw_data() const {
  ACC_CHECK(defined(), "Tensor::raw_data: tensor is undefined");
  return static_cast<char*>(impl_->storage->data()) + impl_->offset * static_cast<int64_t>(dtype_size(impl_->dtype));
}

Tensor Tensor::view(const Shape& new_shape) const {
  Shape shape = new_shape;
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      ACC_CHECK(infer_at < 0, "Tensor::view: more than one -1 in ", shape_str(new_shape));
      infer_at = static_cast<int64_t>(i);
    } else {
      ACC_CHECK(shape[i] >= 0, "Tensor::view: negative dimension in ", shape_str(new_shape));
      known *= shape[i];
    }
  }
  if (infer_at >= 0) {
    ACC_CHECK(known > 0 && numel() % known == 0, "Tensor::view: cannot view ", describe(), " as ",
              shape_str(new_shape));
    shape[static_cast<size_t>(infer_at)] = numel() / known;
  }
  ACC_CHECK(shape_numel(shape) == numel(), "Tensor::view: cannot view ", describe(), " (", numel(),
            " elements) as ", shape_str(new_shape));
  return make_view(*this, impl_->offset, shape);
}

Tensor Tensor::slice_flat(int64_t offset, const Shape& shape) const {
  check_shape(shape, "Tensor::slice_flat");
  ACC_CHECK(offset >= 0 && offset + shape_numel(shape) <= numel(), "Tensor::slice_flat: elements [",
            offset, ", ", offset + shape_numel(shape), ") are outside ", describe());
  return make_view(*this, impl_->offset + offset, shape);
}

Tensor Tensor::narrow(int64_t start, int64_t length) const {
  ACC_CHECK(dim() >= 1, "Tensor::narrow: needs at least one dimension, got ", describe());
  ACC_CHECK(start >= 0 && length >= 0 && start + length <= shape()[0], "Tensor::narrow: rows [",
            start, ", ", start + length, ") are outside ", describe());
  Shape s = shape();
  s[0] = length;
  return make_view(*this, impl_->offset + start * (numel() / std::max<int64_t>(shape()[0], 1)), s);
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape(), dtype());
  std::memcpy(t.raw_data(), raw_data(), nbytes());
  return t;
}

Tensor Tensor::to(DType target) const {
  if (target == dtype()) return clone();
  Tensor t = empty(shape(), target);
  t.copy_(*this);
  return t;
}

Tensor& Tensor::zero_() {
  memory::zero(raw_data(), nbytes(), storage()->tier());  // zero bits are 0 in every dtype
  return *this;
}

Tensor& Tensor::fill_(double value) {
  const int64_t n = numel();
  void* d = raw_data();
  switch (dtype()) {
    case DType::f32: std::fill_n(static_cast<float*>(d), n, static_cast<float>(value)); break;
    case DType::bf16: std::fill_n(static_cast<bfloat16*>(d), n, kernels::to_bf16(static_cast<float>(value))); break;
    case DType::i32: std::fill_n(static_cast<int32_t*>(d), n, static_cast<int32_t>(value)); break;
    case DType::i64: std::fill_n(static_cast<int64_t*>(d), n, static_cast<int64_t>(value)); break;
  }
  return *this;
}

Tensor& Tensor::copy_(const Tensor& src) {
  ACC_CHECK(src.numel() == numel(), "Tensor::copy_: source ", src.describe(), " has ", src.numel(),
            " elements, destination ", describe(), " has ", numel());
  const int64_t n = numel();
  if (src.dtype() == dtype()) {
    std::memmove(raw_data(), src.raw_data(), nbytes());
  } else if (src.dtype() == DType::f32 && dtype() == DType::bf16) {
    kernels::f32_to_bf16(src.data<float>(), data<bfloat16>(), n);
  } else if (src.dtype() == DType::bf16 && dtype() == DType::f32) {
    kernels::bf16_to_f32(src.data<bfloat16>(), data<float>(), n);
  } else {
    for (int64_t i = 0; i < n; ++i) store(raw_data(), dtype(), i, load(src.raw_data(), src.dtype(), i));
  }
  return *this;
}

float Tensor::item() const {
  ACC_CHECK(numel() == 1, "Tensor::item: needs exactly one element, got ", describe());
  return static_cast<float>(load(raw_data(), dtype(), 0));
}

std::vector<float> Tensor::to_vector() const {
  std::vector<float> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) out[static_cast<size_t>(i)] = static_cast<float>(load(raw_data(), dtype(), i));
  return out;
}

std::vector<int64_t> Tensor::to_vector_i64() const {
  std::vector<int64_t> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) {
    out[static_cast<size_t>(i)] = dtype() == DType::i64 ? static_cast<const int64_t*>(raw_data())[i]
                                                        : static_cast<int64_t>(load(raw_data(), dtype(), i));
  }
  return out;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.describe(); }

}  // namespace acc
