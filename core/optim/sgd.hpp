// SGD with optional (Nesterov) momentum, Keras 3 form:
//   m = momentum * m - lr * g;  p += m  (or p += momentum * m - lr * g with nesterov).
#pragma once
#include "core/optim/optimizer.hpp"

namespace distrain {

class Sgd final : public Optimizer {
 public:
  explicit Sgd(const OptimizerSpec& spec) : spec_(spec) {}
  void bind(Backend& backend, int64_t count) override;
  void update(Tensor params, const Tensor& grads, float lr) override;
  std::vector<std::pair<std::string, Tensor>> slots() const override;
  std::string describe() const override;
  std::string type() const override { return spec_.type; }

 private:
  OptimizerSpec spec_;
  Backend* backend_ = nullptr;
  Buffer velocity_;  // only with momentum
};

}  // namespace distrain
