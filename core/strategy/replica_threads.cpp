#include "core/strategy/replica_threads.hpp"

#include <omp.h>

#include "core/base/error.hpp"
#include "core/comm/local_communicator.hpp"

namespace distrain {

ReplicaThreads::ReplicaThreads(int replicas, int omp_threads_each, Abort abort)
    : replicas_(replicas), omp_threads_(omp_threads_each), abort_(std::move(abort)),
      errors_(static_cast<size_t>(replicas)) {
  for (int r = 1; r < replicas_; ++r) threads_.emplace_back([this, r] { worker(r); });
}

ReplicaThreads::~ReplicaThreads() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ReplicaThreads::call(int r) {
  try {
    (*job_)(r);
  } catch (...) {
    errors_[static_cast<size_t>(r)] = std::current_exception();
    if (abort_) abort_("replica " + std::to_string(r) + " failed");
  }
}

void ReplicaThreads::worker(int r) {
  omp_set_num_threads(omp_threads_);
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    call(r);
    std::lock_guard lock(mutex_);
    if (--pending_ == 0) cv_.notify_all();
  }
}

void ReplicaThreads::run(const std::function<void(int)>& fn) {
  std::fill(errors_.begin(), errors_.end(), nullptr);
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    pending_ = replicas_ - 1;
    ++generation_;
  }
  cv_.notify_all();
  const int saved = omp_get_max_threads();
  omp_set_num_threads(omp_threads_);
  call(0);
  omp_set_num_threads(saved);
  {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return pending_ == 0; });
  }
  // The first failure is the cause; the others were woken by the abort it triggered.
  for (int r = 0; r < replicas_; ++r) {
    if (!errors_[static_cast<size_t>(r)]) continue;
    try {
      std::rethrow_exception(errors_[static_cast<size_t>(r)]);
    } catch (const UserError&) {
      throw;
    } catch (const GroupAborted&) {
      continue;
    } catch (const std::exception& e) {
      throw Error(fmt::format("replica {}: {}", r, e.what()));
    }
  }
  for (auto& e : errors_)
    if (e) std::rethrow_exception(e);
}

}  // namespace distrain
