// SGD with optional (Nesterov) momentum, Keras 3 form:
//   m = momentum * m - lr * g;  p += m  (or p += momentum * m - lr * g with nesterov).
#pragma once
#include "core/optim/optimizer.hpp"

namespace distrain {

class Sgd final : public Optimizer {
 public:
  explicit Sgd(const OptimizerSpec& spec) : spec_(spec) {}
  std::vector<std::pair<std::string, Tensor>> slots() const override;
  std::string describe() const override;
  std::string type() const override { return spec_.type; }

 private:
  void allocate_slots(Backend& backend, int64_t count) override;
  void update_range(Tensor params, const Tensor& grads, Range r, float lr, bool decay) override;
  OptimizerSpec spec_;
  Buffer velocity_;  // only with momentum
};

}  // namespace distrain
