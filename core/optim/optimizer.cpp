#include "core/optim/optimizer.hpp"

#include "core/optim/adam.hpp"
#include "core/optim/sgd.hpp"

namespace distrain {

std::vector<std::string> Optimizer::slot_names() const {
  std::vector<std::string> names;
  for (const auto& [name, t] : slots()) names.push_back(name);
  return names;
}

Tensor Optimizer::slot(const std::string& name) const {
  for (const auto& [n, t] : slots())
    if (n == name) return t;
  throw Error(fmt::format("optimizer {} has no slot '{}'", type(), name));
}

OptimizerSpec default_optimizer_spec(const std::string& type) {
  OptimizerSpec s;
  s.type = type;
  if (type == "sgd") s.learning_rate = 0.01;
  if (type == "adamw") s.weight_decay = 0.004;
  return s;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerSpec& spec) {
  if (spec.type == "sgd") return std::make_unique<Sgd>(spec);
  if (spec.type == "adam" || spec.type == "adamw") return std::make_unique<Adam>(spec);
  throw UserError(fmt::format("optimizer.type: unknown optimizer '{}' (known: sgd, adam, adamw)", spec.type));
}

}  // namespace distrain
