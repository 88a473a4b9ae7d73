// Tensor: a non-owning view of device memory (data, shape, dtype, device).
// It never allocates or frees; a Buffer (buffer.hpp) owns the memory it points into.
#pragma once
#include <cstdint>

#include "core/base/dtype.hpp"
#include "core/base/error.hpp"
#include "core/base/shape.hpp"
#include "core/tensor/device.hpp"

namespace distrain {

struct Tensor {
  void* data = nullptr;
  Shape shape;
  DType dtype = DType::f32;
  Device device;

  int64_t numel() const { return shape.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  bool empty() const { return data == nullptr; }

  float* f32() const {
    DT_CHECK(dtype == DType::f32, "tensor is {}, not float32", dtype_name(dtype));
    return static_cast<float*>(data);
  }
  double* f64() const {
    DT_CHECK(dtype == DType::f64, "tensor is {}, not float64", dtype_name(dtype));
    return static_cast<double*>(data);
  }
  int32_t* i32() const {
    DT_CHECK(dtype == DType::i32, "tensor is {}, not int32", dtype_name(dtype));
    return static_cast<int32_t*>(data);
  }
  uint8_t* u8() const {
    DT_CHECK(dtype == DType::u8, "tensor is {}, not uint8", dtype_name(dtype));
    return static_cast<uint8_t*>(data);
  }
  // The same memory seen with another shape of the same element count.
  Tensor reshaped(const Shape& s) const {
    DT_CHECK(s.numel() == numel(), "reshape {} -> {} changes the element count", shape.str(), s.str());
    return Tensor{data, s, dtype, device};
  }
  // The same memory as (numel / width, width): rows of its last `width` elements.
  Tensor rows(int64_t width) const { return reshaped(Shape{numel() / width, width}); }
  // Elements [begin, begin + count) of the flattened tensor, as a 1-D view.
  Tensor range(int64_t begin, int64_t count) const {
    DT_CHECK(begin >= 0 && count >= 0 && begin + count <= numel(), "range [{}, +{}) of {} elements", begin, count, numel());
    return Tensor{static_cast<char*>(data) + begin * static_cast<int64_t>(dtype_size(dtype)), Shape{count}, dtype, device};
  }
};

// A view of n host floats (doubles): small exchanges such as flags, counts and messages.
inline Tensor host_tensor(float* data, int64_t n) { return Tensor{data, Shape{n}, DType::f32, Device{}}; }
inline Tensor host_tensor(double* data, int64_t n) { return Tensor{data, Shape{n}, DType::f64, Device{}}; }

}  // namespace distrain
