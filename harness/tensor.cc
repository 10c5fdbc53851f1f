#include "harness/tensor.h"

#include <cstdlib>
#include <cstring>

#include "harness/error.h"
#include "harness/memory_use.h"
#include "harness/strings.h"

namespace sextant {

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_string(const Shape& shape) { return "[" + join(shape, ", ") + "]"; }

Tensor::Storage::~Storage() {
  if (owner) return;
  memory_note_release(device, memory_kind, bytes);
  if (device == Device::host) std::free(data);
  else cuda_free(data);
}

Tensor Tensor::unfilled(const Shape& shape, DType dtype, Device device) {
  for (int64_t d : shape)
    if (d < 0) throw RuntimeError("tensor shape " + shape_string(shape) + " has a negative dimension");
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.storage_ = std::make_shared<Storage>();
  t.storage_->device = device;
  return t;
}

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  Tensor t = unfilled(shape, dtype, device);
  size_t bytes = t.nbytes();
  if (device == Device::host) {
    // 64-byte alignment for vector loads; never a null pointer for empty tensors.
    size_t rounded = ((bytes + 63) / 64) * 64;
    t.storage_->data = std::aligned_alloc(64, rounded > 0 ? rounded : 64);
    if (!t.storage_->data) throw RuntimeError(cat("out of host memory allocating ", bytes, " bytes"));
  } else {
    t.storage_->data = cuda_malloc(bytes);
  }
  t.storage_->bytes = bytes;
  t.storage_->memory_kind = memory_note_allocation(device, bytes);
  return t;
}

Tensor Tensor::view_of(void* data, const Shape& shape, DType dtype, Device device, std::shared_ptr<void> owner) {
  if (!owner) throw RuntimeError("Tensor::view_of needs the owner of the memory");
  Tensor t = unfilled(shape, dtype, device);
  t.storage_->data = data;
  t.storage_->owner = std::move(owner);
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.zero();
  return t;
}

Tensor Tensor::from_values(const Shape& shape, const std::vector<double>& values, DType dtype) {
  if (static_cast<int64_t>(values.size()) != numel_of(shape))
    throw RuntimeError(cat("from_values: ", values.size(), " values for shape ", shape_string(shape)));
  Tensor t = empty(shape, dtype);
  for (size_t i = 0; i < values.size(); ++i) t.set(static_cast<int64_t>(i), values[i]);
  return t;
}

int64_t Tensor::dim(int i) const {
  int n = ndim();
  if (i < 0) i += n;
  if (i < 0 || i >= n) throw RuntimeError(cat("dim ", i, " out of range for shape ", shape_string(shape_)));
  return shape_[i];
}

void Tensor::check_type(DType requested) const {
  if (requested != dtype_)
    throw RuntimeError(cat("tensor of dtype ", dtype_name(dtype_), " accessed as ", dtype_name(requested)));
}

Tensor Tensor::reshape(const Shape& shape) const {
  if (numel_of(shape) != numel())
    throw RuntimeError(cat("reshape ", shape_string(shape_), " -> ", shape_string(shape), " changes the size"));
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_, device_);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return clone();
  if (!is_host()) {  // a conversion kernel with the same rounding (device_convert.cu)
    Tensor out = empty(shape_, dtype, device_);
    cuda_convert(out.raw(), dtype, raw(), dtype_, static_cast<size_t>(numel()));
    return out;
  }
  Tensor out = empty(shape_, dtype);
  const int64_t n = numel();
  dispatch(dtype_, [&](auto src_tag) {
    using S = decltype(src_tag);
    const S* src = data<S>();
    dispatch(dtype, [&](auto dst_tag) {
      using D = decltype(dst_tag);
      D* dst = out.data<D>();
      for (int64_t i = 0; i < n; ++i) dst[i] = from_double<D>(to_double(src[i]));
    });
  });
  return out;
}

Tensor Tensor::to(Device device) const {
  Tensor out = empty(shape_, dtype_, device);
  out.copy_from(*this);
  return out;
}

void Tensor::zero() {
  if (is_host()) std::memset(raw(), 0, nbytes());
  else cuda_memset_zero(raw(), nbytes());
}

void Tensor::copy_from(const Tensor& src) {
  if (src.shape_ != shape_ || src.dtype_ != dtype_)
    throw RuntimeError(cat("copy_from: ", dtype_name(src.dtype_), shape_string(src.shape_), " into ",
                           dtype_name(dtype_), shape_string(shape_)));
  if (is_host() && src.is_host()) std::memcpy(raw(), src.raw(), nbytes());
  else cuda_copy(raw(), src.raw(), nbytes());
}

double Tensor::at(int64_t i) const {
  if (!is_host()) throw RuntimeError("Tensor::at needs a host tensor");
  return dispatch(dtype_, [&](auto tag) { return to_double(data<decltype(tag)>()[i]); });
}

void Tensor::set(int64_t i, double value) {
  if (!is_host()) throw RuntimeError("Tensor::set needs a host tensor");
  dispatch(dtype_, [&](auto tag) {
    using T = decltype(tag);
    data<T>()[i] = from_double<T>(value);
  });
}

std::vector<double> Tensor::to_vector() const {
  std::vector<double> out(static_cast<size_t>(numel()));
  for (int64_t i = 0; i < numel(); ++i) out[i] = at(i);
  return out;
}

namespace {
// A tensor seen as [outer, dim, inner] around one dimension, in bytes.
struct Around {
  int64_t outer = 1, extent = 1, inner_bytes = 1;
};
Around around(const Tensor& t, int dim) {
  Around a;
  for (int i = 0; i < dim; ++i) a.outer *= t.shape()[i];
  a.extent = t.shape()[dim];
  a.inner_bytes = static_cast<int64_t>(dtype_size(t.dtype()));
  for (int i = dim + 1; i < t.ndim(); ++i) a.inner_bytes *= t.shape()[i];
  return a;
}
int normalize_dim(const Tensor& t, int dim) {
  int n = t.ndim();
  if (dim < 0) dim += n;
  if (dim < 0 || dim >= n) throw RuntimeError(cat("dim ", dim, " out of range for ", shape_string(t.shape())));
  return dim;
}
// Copies `rows` rows of `width` bytes with the given pitches: memcpy on the
// host, cudaMemcpy2D where either side is on the device.
void copy_rows(void* dst, int64_t dst_pitch, const void* src, int64_t src_pitch, int64_t width, int64_t rows,
               bool host) {
  if (!host) {
    cuda_copy_2d(dst, static_cast<size_t>(dst_pitch), src, static_cast<size_t>(src_pitch), static_cast<size_t>(width),
                 static_cast<size_t>(rows));
    return;
  }
  auto* d = static_cast<char*>(dst);
  auto* s = static_cast<const char*>(src);
  for (int64_t o = 0; o < rows; ++o) std::memcpy(d + o * dst_pitch, s + o * src_pitch, static_cast<size_t>(width));
}
}  // namespace

Tensor narrow(const Tensor& t, int dim, int64_t start, int64_t length) {
  dim = normalize_dim(t, dim);
  if (start < 0 || length < 0 || start + length > t.shape()[dim])
    throw RuntimeError(
        cat("narrow [", start, ", ", start + length, ") out of range for dim ", dim, " of ", shape_string(t.shape())));
  Shape shape = t.shape();
  shape[dim] = length;
  Tensor out = Tensor::empty(shape, t.dtype(), t.device());
  Around a = around(t, dim);
  // Row o of the [outer, extent, inner] view contributes its bytes [start, start + length) x inner.
  copy_rows(out.raw(), length * a.inner_bytes, static_cast<const char*>(t.raw()) + start * a.inner_bytes,
            a.extent * a.inner_bytes, length * a.inner_bytes, a.outer, t.is_host());
  return out;
}

void write_slice(Tensor& dst, int dim, int64_t start, const Tensor& src) {
  dim = normalize_dim(dst, dim);
  Shape expect = dst.shape();
  int64_t length = src.ndim() == dst.ndim() ? src.shape()[dim] : -1;
  expect[dim] = length;
  if (src.shape() != expect || src.dtype() != dst.dtype() || start < 0 || start + length > dst.shape()[dim])
    throw RuntimeError(cat("write_slice: ", shape_string(src.shape()), " does not fit ", shape_string(dst.shape()),
                           " at ", start, " along dim ", dim));
  Around a = around(dst, dim);
  copy_rows(static_cast<char*>(dst.raw()) + start * a.inner_bytes, a.extent * a.inner_bytes, src.raw(),
            length * a.inner_bytes, length * a.inner_bytes, a.outer, dst.is_host() && src.is_host());
}

Tensor concat(const std::vector<Tensor>& parts, int dim) {
  if (parts.empty()) throw RuntimeError("concat of no tensors");
  dim = normalize_dim(parts[0], dim);
  Shape shape = parts[0].shape();
  shape[dim] = 0;
  for (const Tensor& p : parts) shape[dim] += p.shape()[dim];
  Tensor out = Tensor::empty(shape, parts[0].dtype(), parts[0].device());
  int64_t start = 0;
  for (const Tensor& p : parts) {
    write_slice(out, dim, start, p);
    start += p.shape()[dim];
  }
  return out;
}

Tensor chunk(const Tensor& t, int dim, int n, int i) {
  int64_t extent = t.dim(dim);
  if (n <= 0 || extent % n != 0) throw RuntimeError(cat("chunk: ", n, " does not divide ", extent));
  return narrow(t, dim, i * (extent / n), extent / n);
}

}  // namespace sextant
