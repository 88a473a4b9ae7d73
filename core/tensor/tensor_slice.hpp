// TensorSlice: a variable held in slices along one axis by the ranks of a mesh's
// tensor axis (Megatron's tensor parallelism). Rank `index` of `count` holds the block
// [index * d / count, (index + 1) * d / count) of the full shape's dimension d = axis,
// rounded down: equal slices where count divides d (the layers ask for that, except a
// vocabulary split, whose slices may differ by one row).
// With groups g > 1 the axis is g equal parts side by side (attention's query, key and
// value columns) and a rank holds its block of each part (Megatron's partition stride).
// Initial values and checkpoints are those of the whole variable: slice_of() takes a rank's
// slice from it, place_slice() puts a slice back.
#pragma once
#include <vector>

#include "core/base/shape.hpp"

namespace distrain {

struct TensorSlice {
  int axis = -1;  // -1: whole
  int index = 0, count = 1;
  int groups = 1;
  bool sliced() const { return axis >= 0 && count > 1; }
};

// Where slice `index` of `count` starts along a dimension of d (rounded down).
int64_t slice_begin(int64_t d, int index, int count);
// The slice's shape: the full shape with dimension `axis` (of each group) cut to the slice's share.
Shape slice_shape(const Shape& full, const TensorSlice& s);
// full (row-major, full_shape) -> the slice's elements, row-major in slice_shape.
std::vector<float> slice_of(const std::vector<float>& full, const Shape& full_shape, const TensorSlice& s);
// The inverse: the slice's elements written into their place in full.
void place_slice(const std::vector<float>& slice, const Shape& full_shape, const TensorSlice& s, std::vector<float>& full);

}  // namespace distrain
