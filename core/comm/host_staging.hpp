// HostStaging: how a communicator that moves host memory carries a device tensor: copied
// to a host buffer, moved, copied back. The owner's backend does the copies (comm/ knows no
// backend); the buffer is kept between calls.
#pragma once
#include <functional>
#include <type_traits>
#include <vector>

#include "core/tensor/tensor.hpp"

namespace distrain {

class HostStaging {
 public:
  using Download = std::function<void(const Tensor& device, void* host)>;
  using Upload = std::function<void(const void* host, Tensor device)>;
  HostStaging() = default;  // for communicators that never see a device tensor
  HostStaging(Download download, Upload upload) : download_(std::move(download)), upload_(std::move(upload)) {}
  // Through `owner`'s download and upload (a Backend, which must outlive this).
  template <class Owner>
    requires(!std::is_same_v<std::remove_cvref_t<Owner>, HostStaging>)
  explicit HostStaging(Owner& owner)
      : HostStaging([&owner](const Tensor& t, void* host) { owner.download(t, host); },
                    [&owner](const void* host, Tensor t) { owner.upload(host, t); }) {}

  // t handed to `op` as a host copy, and the result copied back into t.
  void through_host(Tensor t, const std::function<void(Tensor)>& op);
  // The same for an operation from `in` to `out`.
  void through_host(const Tensor& in, Tensor out, const std::function<void(const Tensor&, Tensor)>& op);
  // t's elements as a host copy in `host` (resized to fit), seen as a tensor.
  Tensor copy_to_host(const Tensor& t, std::vector<char>& host) const;
  void copy_from_host(const void* host, Tensor t) const;
  // A host tensor of t's shape and type in `host` (resized to fit), its contents as they were.
  static Tensor host_view(const Tensor& t, std::vector<char>& host);

 private:
  Download download_;
  Upload upload_;
  std::vector<char> host_, host_out_;  // kept between calls
};

}  // namespace distrain
