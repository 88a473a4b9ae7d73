// The plan of the buffers that hold activation gradients in turn (core/model/gradient_slots.hpp).
#include <doctest/doctest.h>

#include "core/model/gradient_slots.hpp"

namespace distrain {
namespace {

std::vector<std::vector<int>> chain(int layers) {
  std::vector<std::vector<int>> inputs;
  for (int i = 0; i < layers; ++i) inputs.push_back({i - 1});
  return inputs;
}

}  // namespace

TEST_CASE("gradient slots: a chain takes two, each as large as the largest gradient it holds") {
  const GradientSlots p = plan_gradient_slots({10, 40, 40, 20, 5}, chain(5), 0);
  CHECK(p.elements.size() == 2);
  CHECK(p.slot[4] != p.slot[3]);
  CHECK(p.slot[3] != p.slot[2]);
  CHECK(p.slot[2] != p.slot[1]);
  CHECK(p.slot[1] != p.slot[0]);
  CHECK(p.total_elements() == 80);  // layers 1 and 2 (40 each) are live together
}

TEST_CASE("gradient slots: a residual stream's gradient stays live across its block") {
  // 0: embedding; 1: norm; 2: attention; 3: add(0, 2); 4: norm; 5: mlp up (4x); 6: mlp
  // down; 7: add(3, 6); 8: head
  const std::vector<int64_t> elements{8, 8, 8, 8, 8, 32, 8, 8, 16};
  const std::vector<std::vector<int>> inputs{{-1}, {0}, {1}, {0, 2}, {3}, {4}, {5}, {3, 6}, {7}};
  const GradientSlots p = plan_gradient_slots(elements, inputs, 0);
  // While layer 5 (mlp up) runs backward: its own gradient (32), its input's (8) and the
  // stream's (layer 3's, written by the add at 7) are live together.
  CHECK(p.slot[3] != p.slot[5]);
  CHECK(p.slot[3] != p.slot[4]);
  CHECK(p.slot[4] != p.slot[5]);
  CHECK(p.slot[0] != p.slot[1]);
  CHECK(p.slot[0] != p.slot[2]);
  CHECK(p.elements.size() == 3);
  CHECK(p.total_elements() == 32 + 16 + 8);
}

TEST_CASE("gradient slots: none below the end of backward, but always the output") {
  const GradientSlots p = plan_gradient_slots({4, 4, 4, 4}, chain(4), 2);
  CHECK(p.slot[0] == -1);
  CHECK(p.slot[1] == -1);  // layer 2, the first that trains, needs no input gradient
  CHECK(p.slot[2] != -1);
  CHECK(p.slot[3] != -1);
  const GradientSlots none = plan_gradient_slots({4, 4, 6}, chain(3), 3);  // nothing trains
  CHECK(none.slot == std::vector<int>{-1, -1, 0});
  CHECK(none.total_elements() == 6);
}

}  // namespace distrain
