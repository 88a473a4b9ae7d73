// Buffer: owns device memory (RAII, move-only), allocated through the device's backend.
// Hand out Tensor views with view(); the buffer must outlive them.
#pragma once
#include "core/tensor/tensor.hpp"

namespace distrain {

class Backend;

class Buffer {
 public:
  Buffer() = default;
  Buffer(Backend& backend, Shape shape, DType dtype = DType::f32);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  Tensor view() const { return view_; }
  const Shape& shape() const { return view_.shape; }
  bool empty() const { return view_.data == nullptr; }

 private:
  void release();
  Backend* backend_ = nullptr;
  Tensor view_;
};

}  // namespace distrain
