// The plan of the buffers that hold float32 copies of activations kept in bf16
// (core/model/activation_slots.hpp).
#include <doctest/doctest.h>

#include "core/model/activation_slots.hpp"

namespace distrain {

TEST_CASE("activation slots: a chain's copies take two slots in each pass") {
  // Layers 0..3 kept in bf16, layer 4 (the head) in float32. Forward: layer i writes i and
  // reads i - 1. Backward: layer i reads its input and its output.
  const std::vector<int64_t> elements{10, 40, 40, 20, 5};
  const std::vector<PassStep> forward{{0, {}}, {1, {0}}, {2, {1}}, {3, {2}}, {-1, {3}}};
  const std::vector<PassStep> backward{{-1, {3}}, {-1, {2, 3}}, {-1, {1, 2}}, {-1, {0, 1}}, {-1, {0}}};
  const ActivationSlots p = plan_activation_slots(elements, forward, backward);
  CHECK(p.elements.size() == 2);
  for (size_t i = 0; i + 1 < 4; ++i) {
    CHECK(p.forward[i] != p.forward[i + 1]);
    CHECK(p.backward[i] != p.backward[i + 1]);
  }
  CHECK(p.forward[4] == -1);  // kept whole
  CHECK(p.total_elements() == 80);  // layers 1 and 2 (40 each) are live together
}

TEST_CASE("activation slots: a residual stream's copy stays live across its block, in both passes") {
  // 0: embedding; 1: norm; 2: attention; 3: add(0, 2); 4: head (float32).
  const std::vector<int64_t> elements{8, 8, 8, 8, 16};
  const std::vector<PassStep> forward{{0, {}}, {1, {0}}, {2, {1}}, {3, {0, 2}}, {-1, {3}}};
  const std::vector<PassStep> backward{{-1, {3}}, {-1, {0, 2, 3}}, {-1, {1, 2}}, {-1, {0, 1}}, {-1, {0}}};
  const ActivationSlots p = plan_activation_slots(elements, forward, backward);
  for (const std::vector<int>* pass : {&p.forward, &p.backward}) {
    CHECK((*pass)[0] != (*pass)[1]);
    CHECK((*pass)[0] != (*pass)[2]);
    CHECK((*pass)[1] != (*pass)[2]);
  }
  CHECK(p.forward[3] != p.forward[0]);  // the add writes while it reads the stream
  CHECK(p.elements.size() == 3);
}

TEST_CASE("activation slots: a copy read again only by a rerun lives from the rerun on") {
  // Backward reads layer 0's output first in a recomputed block's forward (step 1), last in
  // its own backward (step 3); layer 1's copy, read at step 2 alone, may share nothing with it.
  const std::vector<int64_t> elements{6, 6, 4};
  const std::vector<PassStep> forward{{0, {}}, {1, {0}}, {-1, {1}}};
  const std::vector<PassStep> backward{{-1, {1}}, {-1, {0}}, {-1, {0, 1}}, {-1, {0}}};
  const ActivationSlots p = plan_activation_slots(elements, forward, backward);
  CHECK(p.backward[0] != p.backward[1]);
  CHECK(p.backward[2] == -1);
  CHECK(p.elements.size() == 2);
}

TEST_CASE("activation slots: a small copy does not hold a large slot that two large copies need later") {
  // 0 and 1 (40 each) end at step 1; 2 (8) lives over steps 2-4, beside 3 and 4 (40 each).
  // Taken in step order, 2 would sit in one of the two large slots and 4 would need a third
  // large one (120); largest first, 2 gets a small slot of its own (88).
  const std::vector<int64_t> elements{40, 40, 8, 40, 40};
  const std::vector<PassStep> forward{{0, {}}, {1, {0}}, {2, {}}, {3, {2}}, {4, {2, 3}}};
  const ActivationSlots p = plan_activation_slots(elements, forward, {});
  CHECK(p.elements.size() == 3);
  CHECK(p.total_elements() == 88);
  CHECK(p.forward[3] != p.forward[4]);
  CHECK(p.forward[2] != p.forward[3]);
}

}  // namespace distrain
