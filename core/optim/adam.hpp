// Adam and AdamW, Keras 3 form:
//   m += (g - m)(1 - b1);  v += (g^2 - v)(1 - b2)
//   p -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + epsilon)
// AdamW first applies decoupled weight decay p -= p * weight_decay * lr.
#pragma once
#include "core/optim/optimizer.hpp"

namespace distrain {

class Adam final : public Optimizer {
 public:
  explicit Adam(const OptimizerSpec& spec) : spec_(spec) {}
  std::vector<std::pair<std::string, Tensor>> slots() const override;
  std::string describe() const override;
  std::string type() const override { return spec_.type; }

 private:
  void allocate_slots(Backend& backend, int64_t count) override;
  void update_range(Tensor params, const Tensor& grads, Range r, float lr, bool decay) override;
  OptimizerSpec spec_;
  Buffer m_, v_;
};

}  // namespace distrain
