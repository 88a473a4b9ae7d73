#include "core/backend/device_memory.hpp"

#include <algorithm>

#include "core/base/error.hpp"
#include "core/base/host_memory.hpp"

namespace distrain {

namespace {
thread_local const MemoryPurpose* innermost = nullptr;
}  // namespace

void DeviceMemory::set_budget(int64_t bytes) {
  DT_CHECK(bytes >= 0, "a device memory budget of {} bytes", bytes);
  std::lock_guard lock(mutex_);
  budget_ = bytes;
}

int64_t DeviceMemory::budget() const {
  std::lock_guard lock(mutex_);
  return budget_;
}

void DeviceMemory::charge(const Tensor& buffer) {
  const auto bytes = static_cast<int64_t>(buffer.bytes());
  std::lock_guard lock(mutex_);
  if (budget_ > 0 && bytes > budget_ - in_use_) {
    const std::string& what = MemoryPurpose::current();
    throw UserError(fmt::format("device {}: out of memory (strategy.device_memory = {}): allocating {} for {} ({} {}) "
                                "with {} in use; give the device more memory, or shard, offload or recompute to need less",
                                buffer.device.str(), format_bytes(budget_), format_bytes(bytes),
                                what.empty() ? "a buffer" : what, buffer.shape.str(), dtype_name(buffer.dtype),
                                format_bytes(in_use_)));
  }
  in_use_ += bytes;
  peak_ = std::max(peak_, in_use_);
}

void DeviceMemory::refund(int64_t bytes) {
  std::lock_guard lock(mutex_);
  in_use_ -= bytes;
}

int64_t DeviceMemory::in_use() const {
  std::lock_guard lock(mutex_);
  return in_use_;
}

int64_t DeviceMemory::peak() const {
  std::lock_guard lock(mutex_);
  return peak_;
}

void DeviceMemory::reset_peak() {
  std::lock_guard lock(mutex_);
  peak_ = in_use_;
}

MemoryPurpose::MemoryPurpose(const std::string& what) : what_(what), outer_(innermost) { innermost = this; }

MemoryPurpose::~MemoryPurpose() { innermost = outer_; }

const std::string& MemoryPurpose::current() {
  static const std::string none;
  return innermost ? innermost->what_ : none;
}

}  // namespace distrain
