#include "core/comm/host_staging.hpp"

#include "core/base/error.hpp"

namespace distrain {

Tensor HostStaging::host_view(const Tensor& t, std::vector<char>& host) {
  host.resize(t.bytes());
  return Tensor{host.data(), t.shape, t.dtype, Device{}};
}

Tensor HostStaging::copy_to_host(const Tensor& t, std::vector<char>& host) const {
  DT_CHECK(download_, "a device tensor on {} reached a communicator given no host staging", t.device.str());
  const Tensor h = host_view(t, host);
  download_(t, h.data);
  return h;
}

void HostStaging::copy_from_host(const void* host, Tensor t) const {
  DT_CHECK(upload_, "a device tensor on {} reached a communicator given no host staging", t.device.str());
  upload_(host, t);
}

void HostStaging::through_host(Tensor t, const std::function<void(Tensor)>& op) {
  op(copy_to_host(t, host_));
  copy_from_host(host_.data(), t);
}

void HostStaging::through_host(const Tensor& in, Tensor out, const std::function<void(const Tensor&, Tensor)>& op) {
  const Tensor host_out = host_view(out, host_out_);
  op(copy_to_host(in, host_), host_out);
  copy_from_host(host_out.data, out);
}

}  // namespace distrain
