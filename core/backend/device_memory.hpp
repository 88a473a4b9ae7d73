// DeviceMemory: the bytes one device holds in Buffers, their high-water mark, and an
// optional budget (strategy.device_memory): on a CPU device it emulates an accelerator's
// capacity, so "does not fit on one device" is something a run on this machine can meet.
// Going over the budget is a UserError naming the device, what was being allocated, the
// bytes in use and the budget; nothing is allocated then. Host memory a strategy uses
// (offloading, staging) is not a device's and does not count.
//
// What an allocation is for comes from the innermost MemoryPurpose on the allocating
// thread ("the activations of the model for a batch of 64"), and the buffer's shape.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>

#include "core/tensor/tensor.hpp"

namespace distrain {

class DeviceMemory {
 public:
  // 0: no budget.
  void set_budget(int64_t bytes);
  int64_t budget() const;
  // Counts the bytes of `buffer` (its shape, type and device; no data yet) before they are
  // allocated; throws UserError past the budget.
  void charge(const Tensor& buffer);
  void refund(int64_t bytes);
  int64_t in_use() const;
  int64_t peak() const;
  // Starts a new high-water mark from what is in use now.
  void reset_peak();

 private:
  mutable std::mutex mutex_;  // replicas' threads and the loader may allocate at once
  int64_t budget_ = 0, in_use_ = 0, peak_ = 0;
};

// Names what the buffers allocated on this thread in its lifetime are for, in budget
// errors; scopes nest (the innermost names). `what` must outlive the scope.
class MemoryPurpose {
 public:
  explicit MemoryPurpose(const std::string& what);
  ~MemoryPurpose();
  MemoryPurpose(const MemoryPurpose&) = delete;
  MemoryPurpose& operator=(const MemoryPurpose&) = delete;
  // The innermost purpose on this thread, empty outside any.
  static const std::string& current();

 private:
  const std::string& what_;
  const MemoryPurpose* outer_;
};

}  // namespace distrain
