#include "core/comm/communicator.hpp"

#include "core/base/error.hpp"

namespace distrain {

int64_t Communicator::start_send(const Tensor&, int, int, std::string_view what) {
  throw Error(fmt::format("the {} communicator has no point-to-point messages (sending {})", backend_name(), what));
}

void Communicator::wait_send(int64_t id) {
  DT_CHECK(id == 0, "the {} communicator has no point-to-point messages", backend_name());
}

void Communicator::recv(Tensor, int, int, std::string_view what) {
  throw Error(fmt::format("the {} communicator has no point-to-point messages (waiting for {})", backend_name(), what));
}

}  // namespace distrain
