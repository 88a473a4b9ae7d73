// What `distrain check` prints for a mesh recipe: each rank's coordinates, the slice of
// every split variable it holds, and its bytes of parameters, gradients, optimizer slots
// and activations. Built from the recipe alone (a model per tensor rank, no MPI). Returns
// the largest device total of a rank.
#pragma once
#include <cstdint>
#include <cstdio>
#include <vector>

#include "core/io/recipe.hpp"

namespace distrain {

int64_t print_mesh_plan(std::FILE* out, const Recipe& recipe);

// A rank's predicted device bytes; `offloaded`: its optimizer state in host memory;
// `values`: its trainable values (of `parameters`), which the data axis all-reduces.
struct RankBytes {
  int64_t parameters = 0, gradients = 0, optimizer = 0, activations = 0, offloaded = 0, values = 0;
  int64_t total() const { return parameters + gradients + optimizer + activations; }
};

// Every rank's RankBytes, as print_mesh_plan predicts them, printing nothing.
std::vector<RankBytes> mesh_rank_bytes(const Recipe& recipe);

}  // namespace distrain
