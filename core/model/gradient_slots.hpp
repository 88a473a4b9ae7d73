// Where the gradients of a model's activations live in backward. A layer's output gradient
// is needed from the backward of its last reader (the first in backward order, which writes
// it) until its own layer's backward (which consumes it), so a few buffers hold them all in
// turn: a chain needs two, a residual stream's gradient one more across its block. Keeping
// every layer's, as the activations are kept, would double the activations' memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace distrain {

struct GradientSlots {
  std::vector<int> slot;          // per layer: the slot holding its output's gradient, -1: never needed
  std::vector<int64_t> elements;  // per slot: its size per example, the largest gradient it holds
  int64_t total_elements() const;
};

// elements: each layer's output size per example; inputs: each layer's inputs (earlier
// layers' indices, -1 the model's input, whose gradient is not planned here); backward runs
// from the last layer down to layer `last`, and the last layer's gradient (the loss writes
// it) is needed even when that is nothing. A freed slot goes to the next gradient that
// fits it best; where none fits, the largest free slot grows.
GradientSlots plan_gradient_slots(const std::vector<int64_t>& elements, const std::vector<std::vector<int>>& inputs,
                                  size_t last);

}  // namespace distrain
