// What `distrain check` prints for a mesh recipe: each rank's coordinates, the slice of
// every split variable it holds, and its bytes of parameters, gradients, optimizer slots
// and activations. Built from the recipe alone (a model per tensor rank, no MPI). Returns
// the largest device total of a rank.
#pragma once
#include <cstdint>
#include <cstdio>

#include "core/io/recipe.hpp"

namespace distrain::cli {

int64_t print_mesh_plan(std::FILE* out, const Recipe& recipe);

}  // namespace distrain::cli
