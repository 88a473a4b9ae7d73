// OptimizerState: the optimizer as checkpoints see it: its type, iteration count and named
// slots, read and written one variable at a time in the variable's shape, whatever the
// sharding. Under a sharded strategy read() is collective (every rank calls it, in the
// same order) and write() takes from the whole variable the part this rank owns.
#pragma once
#include <string>
#include <vector>

#include "core/optim/optimizer.hpp"
#include "core/tensor/param_arena.hpp"

namespace distrain {

class OptimizerState {
 public:
  virtual ~OptimizerState() = default;
  virtual std::string type() const = 0;
  virtual int64_t iterations() const = 0;
  virtual void set_iterations(int64_t n) = 0;
  virtual std::vector<std::string> slot_names() const = 0;
  virtual void read(const std::string& slot, const Variable& v, std::vector<float>& out) = 0;
  virtual void write(const std::string& slot, const Variable& v, const std::vector<float>& in) = 0;
};

// An optimizer over the whole arena (replicated strategies): slot offsets are the arena's.
class ArenaOptimizerState final : public OptimizerState {
 public:
  ArenaOptimizerState(Optimizer& optimizer, Backend& backend) : opt_(optimizer), backend_(backend) {}
  std::string type() const override { return opt_.type(); }
  int64_t iterations() const override { return opt_.iterations(); }
  void set_iterations(int64_t n) override { opt_.set_iterations(n); }
  std::vector<std::string> slot_names() const override;
  void read(const std::string& slot, const Variable& v, std::vector<float>& out) override;
  void write(const std::string& slot, const Variable& v, const std::vector<float>& in) override;

 private:
  Tensor slot_view(const std::string& slot, const Variable& v) const;
  Optimizer& opt_;
  Backend& backend_;
};

}  // namespace distrain
