// Tensor: contiguous, row-major, shared storage, with a dtype and a device.
// Attention activations are BSHD: [batch, seq, heads, head_dim].
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "harness/device.h"
#include "harness/dtype.h"

namespace sextant {

using Shape = std::vector<int64_t>;

int64_t numel_of(const Shape& shape);
std::string shape_string(const Shape& shape);  // "[2, 64, 4, 16]"

class Tensor {
 public:
  Tensor() = default;  // undefined: no storage
  static Tensor empty(const Shape& shape, DType dtype, Device device = Device::host);
  static Tensor zeros(const Shape& shape, DType dtype, Device device = Device::host);
  // Host tensor from values, rounded to dtype.
  static Tensor from_values(const Shape& shape, const std::vector<double>& values, DType dtype);
  // A tensor over memory it does not own (a peer-memory window): `owner`
  // keeps that memory alive while any copy of the handle lives.
  static Tensor view_of(void* data, const Shape& shape, DType dtype, Device device, std::shared_ptr<void> owner);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return static_cast<int>(shape_.size()); }
  int64_t dim(int i) const;  // negative i counts from the back
  int64_t numel() const { return numel_of(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool is_host() const { return device_ == Device::host; }

  void* raw() { return storage_ ? storage_->data : nullptr; }
  const void* raw() const { return storage_ ? storage_->data : nullptr; }
  // Typed pointer; throws unless T matches dtype().
  template <class T>
  T* data() {
    check_type(dtype_of<T>());
    return static_cast<T*>(raw());
  }
  template <class T>
  const T* data() const {
    check_type(dtype_of<T>());
    return static_cast<const T*>(raw());
  }

  // Same storage, new shape (same number of elements).
  Tensor reshape(const Shape& shape) const;
  // Deep copies.
  Tensor clone() const;
  Tensor to(DType dtype) const;    // same device; rounds to nearest even
  Tensor to(Device device) const;  // copies across devices (same dtype)
  void zero();
  void copy_from(const Tensor& src);  // same shape and dtype, any devices

  // The rank that provided each element, where the tensor was assembled
  // from the ranks' blocks (assemble.h: the lowest rank of replicas, -1
  // where none did); nullptr otherwise. Copies of the handle and reshape()
  // keep it; anything that makes new storage drops it.
  const std::vector<int32_t>* owner_ranks() const { return owners_.get(); }
  void set_owner_ranks(std::shared_ptr<const std::vector<int32_t>> owners) { owners_ = std::move(owners); }

  // Slow element access for tests and checks (host only).
  double at(int64_t flat_index) const;
  void set(int64_t flat_index, double value);
  std::vector<double> to_vector() const;  // host only

 private:
  struct Storage {
    void* data = nullptr;
    Device device = Device::host;
    std::shared_ptr<void> owner;  // set: data belongs to it (view_of), not freed here
    size_t bytes = 0;             // as counted by memory_use.h ...
    int memory_kind = -1;         // ... under this kind (-1: not counted)
    ~Storage();
  };
  void check_type(DType requested) const;
  // A handle with storage that holds no memory yet, for empty() and view_of().
  static Tensor unfilled(const Shape& shape, DType dtype, Device device);

  std::shared_ptr<Storage> storage_;
  std::shared_ptr<const std::vector<int32_t>> owners_;
  Shape shape_;
  DType dtype_ = DType::f32;
  Device device_ = Device::host;
};

// Copy helpers along one dimension (used to shard and to assemble), for host
// and device tensors (device copies are cudaMemcpy2D on the compute stream).
// narrow: the [start, start+length) slice of dim, as a new contiguous tensor on t's device.
Tensor narrow(const Tensor& t, int dim, int64_t start, int64_t length);
// concat: tensors equal except along dim, joined in order, on the first part's device.
Tensor concat(const std::vector<Tensor>& parts, int dim);
// Writes src into dst at offset `start` along dim (all other dims equal; any devices).
void write_slice(Tensor& dst, int dim, int64_t start, const Tensor& src);
// chunk i of n equal chunks along dim.
Tensor chunk(const Tensor& t, int dim, int n, int i);

}  // namespace sextant
