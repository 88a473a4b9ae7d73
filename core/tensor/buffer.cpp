#include "core/tensor/buffer.hpp"

#include <utility>

#include "core/backend/backend.hpp"

namespace distrain {

Buffer::Buffer(Backend& backend, Shape shape, DType dtype) : backend_(&backend) {
  view_.shape = std::move(shape);
  view_.dtype = dtype;
  view_.device = backend.device();
  if (!view_.bytes()) return;
  backend.memory().charge(view_);
  try {
    view_.data = backend.allocate(view_.bytes());
  } catch (...) {
    backend.memory().refund(static_cast<int64_t>(view_.bytes()));
    throw;
  }
}

Buffer::~Buffer() { release(); }

Buffer::Buffer(Buffer&& other) noexcept : backend_(other.backend_), view_(std::exchange(other.view_, Tensor{})) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    backend_ = other.backend_;
    view_ = std::exchange(other.view_, Tensor{});
  }
  return *this;
}

void Buffer::release() {
  if (backend_ && view_.data) {
    backend_->deallocate(view_.data);
    backend_->memory().refund(static_cast<int64_t>(view_.bytes()));
  }
  view_.data = nullptr;
}

}  // namespace distrain
