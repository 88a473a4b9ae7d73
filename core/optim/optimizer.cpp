#include "core/optim/optimizer.hpp"

#include "core/optim/adam.hpp"
#include "core/optim/sgd.hpp"

namespace distrain {

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
