#include "core/comm/communicator.hpp"

#include "core/base/error.hpp"

namespace distrain {

int64_t Communicator::start_send(const Tensor&, int, int, std::string_view what) {
  throw Error(fmt::format("the {} communicator has no point-to-point messages (sending {})", backend_name(), what));
}

void Communicator::wait_send(int64_t id) {
  DT_CHECK(id == 0, "the {} communicator has no point-to-point messages", backend_name());
}

void Communicator::check_gathered(const Tensor& in, const Tensor& out, const char* backend) const {
  DT_CHECK(in.dtype == out.dtype && (in.dtype == DType::f32 || in.dtype == DType::bf16),
           "{} communicator: all_gather of {} into {}; it gathers float32 or bf16, the same in and out", backend,
           dtype_name(in.dtype), dtype_name(out.dtype));
  DT_CHECK(out.numel() == in.numel() * size(), "all_gather: output {} is not {} x input {}", out.numel(), size(), in.numel());
}

void Communicator::recv(Tensor, int, int, std::string_view what) {
  throw Error(fmt::format("the {} communicator has no point-to-point messages (waiting for {})", backend_name(), what));
}

}  // namespace distrain
