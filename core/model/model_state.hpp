// ModelState: a model's variables as checkpoints and initialisation see them: one
// variable at a time, in its shape, whatever the sharding. Under a strategy that shards
// parameters (ZeRO stage 3) read() is collective (every replica calls it, in the same
// order) and write() keeps the part this replica owns.
#pragma once
#include <vector>

#include "core/tensor/param_arena.hpp"

namespace distrain {

class ModelState {
 public:
  virtual ~ModelState() = default;
  // The variables: names, whole shapes (full_shape), offsets (the layout every strategy shares).
  virtual const ParamArena& layout() const = 0;
  // Whole variables (full_shape), whatever this rank holds of them.
  virtual void read(int id, std::vector<float>& out) = 0;
  virtual void write(int id, const std::vector<float>& in) = 0;
  // Every variable drawn from the seed (glorot_uniform, zeros, ...), written through write().
  void initialize(uint64_t seed) {
    for (size_t i = 0; i < layout().variables().size(); ++i)
      write(static_cast<int>(i), layout().whole_initial_value(static_cast<int>(i), seed));
  }
};

// A model that holds all its variables (every strategy but ZeRO stage 3).
class ArenaModelState final : public ModelState {
 public:
  explicit ArenaModelState(ParamArena& arena) : arena_(arena) {}
  const ParamArena& layout() const override { return arena_; }
  void read(int id, std::vector<float>& out) override;
  void write(int id, const std::vector<float>& in) override;

 private:
  ParamArena& arena_;
};

}  // namespace distrain
