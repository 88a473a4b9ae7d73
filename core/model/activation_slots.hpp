// Where the float32 copies of activations kept in bf16 live (train.precision = "bf16").
// Such an activation is rounded to bf16 when its layer computes it and kept at 2 bytes an
// element; the layers read float32, so a copy lives in one of a few slots only while some
// layer reads it: in forward from its layer's forward to its last reader's, in backward
// from the first step that reads it again (a recomputed block's forward, or its last
// reader's backward) to its last (its own layer's backward).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace distrain {

// One layer's run within a pass: the kept-in-bf16 activations it reads and the one it
// writes (-1: none).
struct PassStep {
  int writes = -1;
  std::vector<int> reads;
};

struct ActivationSlots {
  std::vector<int> forward, backward;  // per layer: its float32 copy's slot in that pass, -1: none
  std::vector<int64_t> elements;       // per slot: its size per example
  int64_t total_elements() const;
};

// elements: each layer's output size per example; the two passes' steps in the order the
// model runs them.
ActivationSlots plan_activation_slots(const std::vector<int64_t>& elements, const std::vector<PassStep>& forward,
                                      const std::vector<PassStep>& backward);

}  // namespace distrain
