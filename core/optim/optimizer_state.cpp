#include "core/optim/optimizer_state.hpp"

#include "core/backend/backend.hpp"

namespace distrain {

std::vector<std::string> ArenaOptimizerState::slot_names() const { return opt_.slot_names(); }

Tensor ArenaOptimizerState::slot_view(const std::string& slot, const Variable& v) const {
  return opt_.slot(slot).range(v.offset, v.shape.numel());
}

void ArenaOptimizerState::read(const std::string& slot, const Variable& v, std::vector<float>& out) {
  out.resize(static_cast<size_t>(v.shape.numel()));
  backend_.download(slot_view(slot, v), out.data());
}

void ArenaOptimizerState::write(const std::string& slot, const Variable& v, const std::vector<float>& in) {
  backend_.upload(in.data(), slot_view(slot, v));
}

}  // namespace distrain
