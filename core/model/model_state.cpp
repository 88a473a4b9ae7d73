#include "core/model/model_state.hpp"

#include "core/backend/backend.hpp"

namespace distrain {

void ArenaModelState::read(int id, std::vector<float>& out) {
  const Tensor t = arena_.value(id);
  out.resize(static_cast<size_t>(t.numel()));
  arena_.backend().download(t, out.data());
}

void ArenaModelState::write(int id, const std::vector<float>& in) { arena_.backend().upload(in.data(), arena_.value(id)); }

}  // namespace distrain
