// Shape: the extents of a tensor, outermost first (activations are NHWC).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/base/error.hpp"

namespace distrain {

// Shapes come from recipes and data files, so a product too large to count is bad input,
// and the model names the layer or key that made it (Model's constructor catches this).
class ShapeOverflow : public UserError {
 public:
  using UserError::UserError;
};

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int i) const {
    DT_CHECK(i >= 0 && i < rank(), "dimension {} of a rank-{} shape", i, rank());
    return dims_[static_cast<size_t>(i)];
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims_)
      if (__builtin_mul_overflow(n, d, &n)) throw ShapeOverflow(fmt::format("the element count of {} overflows int64", str()));
    return n;
  }
  const std::vector<int64_t>& dims() const { return dims_; }
  // (n, dims...): prepend a batch dimension to a per-example shape.
  Shape batched(int64_t n) const {
    std::vector<int64_t> d{n};
    d.insert(d.end(), dims_.begin(), dims_.end());
    return Shape(std::move(d));
  }
  std::string str() const {
    std::string s = "(";
    for (size_t i = 0; i < dims_.size(); ++i) s += (i ? ", " : "") + std::to_string(dims_[i]);
    return s + (dims_.size() == 1 ? ",)" : ")");
  }
  bool operator==(const Shape&) const = default;

 private:
  std::vector<int64_t> dims_;
};

}  // namespace distrain
