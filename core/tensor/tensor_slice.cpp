#include "core/tensor/tensor_slice.hpp"

#include <algorithm>

#include "core/base/error.hpp"

namespace distrain {

namespace {

// The full shape as (outer, dim, inner) around the sliced axis, and the slice's share of
// dim ([begin, begin + part)); groups of the axis count as outer.
struct Blocks {
  int64_t outer = 1, dim = 1, inner = 1, begin = 0, part = 1;
};

Blocks blocks(const Shape& full, const TensorSlice& s) {
  DT_CHECK(s.sliced() && s.axis < full.rank() && s.index >= 0 && s.index < s.count, "slice {} of {} on axis {} of {}",
           s.index, s.count, s.axis, full.str());
  Blocks b;
  for (int i = 0; i < s.axis; ++i) b.outer *= full[i];
  DT_CHECK(s.groups >= 1 && full[s.axis] % s.groups == 0, "dimension {} of {} is not {} groups", s.axis, full.str(), s.groups);
  b.outer *= s.groups;
  b.dim = full[s.axis] / s.groups;
  for (int i = s.axis + 1; i < full.rank(); ++i) b.inner *= full[i];
  DT_CHECK(b.dim >= s.count, "dimension {} of {} does not split into {} slices", s.axis, full.str(), s.count);
  b.begin = slice_begin(b.dim, s.index, s.count);
  b.part = slice_begin(b.dim, s.index + 1, s.count) - b.begin;
  return b;
}

}  // namespace

int64_t slice_begin(int64_t dim, int index, int count) { return dim * index / count; }

Shape slice_shape(const Shape& full, const TensorSlice& s) {
  if (!s.sliced()) return full;
  std::vector<int64_t> dims;
  for (int i = 0; i < full.rank(); ++i) dims.push_back(i == s.axis ? blocks(full, s).part * s.groups : full[i]);
  return Shape(std::move(dims));
}

std::vector<float> slice_of(const std::vector<float>& full, const Shape& full_shape, const TensorSlice& s) {
  if (!s.sliced()) return full;
  const Blocks b = blocks(full_shape, s);
  std::vector<float> out(static_cast<size_t>(b.outer * b.part * b.inner));
  const int64_t run = b.part * b.inner;  // contiguous per outer index
  for (int64_t o = 0; o < b.outer; ++o) {
    const auto from = full.begin() + (o * b.dim + b.begin) * b.inner;
    std::copy(from, from + run, out.begin() + o * run);
  }
  return out;
}

void place_slice(const std::vector<float>& slice, const Shape& full_shape, const TensorSlice& s, std::vector<float>& full) {
  if (!s.sliced()) {
    full = slice;
    return;
  }
  const Blocks b = blocks(full_shape, s);
  const int64_t run = b.part * b.inner;
  for (int64_t o = 0; o < b.outer; ++o)
    std::copy(slice.begin() + o * run, slice.begin() + (o + 1) * run, full.begin() + (o * b.dim + b.begin) * b.inner);
}

}  // namespace distrain
