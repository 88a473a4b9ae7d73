// Which parameters weight decay applies to: the kernels, the matrices a layer multiplies by
// (dense, conv2d, attention's qkv_kernel and proj_kernel), not biases, normalisation scales
// and shifts, or embedding tables (token or position; a head tied to the token table is
// that table). As GPT-2's recipe and most transformer trainers do: decaying biases and
// norms only pulls the model towards a worse function.
#pragma once
#include <vector>

#include "core/base/range.hpp"
#include "core/tensor/param_arena.hpp"

namespace distrain {

bool decays(const Variable& v);
// The arena ranges (of values/grads) of the variables that decay, neighbours merged: the
// padding between two of them is zero and stays zero, so decaying it changes nothing.
std::vector<Range> decayed_ranges(const ParamArena& arena);
// The parts of `ranges` inside `window`, counted from window.begin: for an optimizer that
// updates one contiguous part of the arena.
std::vector<Range> within(const std::vector<Range>& ranges, Range window);

}  // namespace distrain
