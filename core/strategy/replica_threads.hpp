// ReplicaThreads: one long-lived thread per local replica (replica 0 runs on the caller),
// each with its own OpenMP thread count, so replicas on CPU devices share the cores.
// run(fn) calls fn(r) for every replica and returns when all are done; if any throws, the
// `abort` is called (waking the others, so no replica waits forever in a collective) and
// the first error is rethrown with its replica's number.
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace distrain {

class ReplicaThreads {
 public:
  using Abort = std::function<void(const std::string& why)>;
  ReplicaThreads(int replicas, int omp_threads_each, Abort abort);
  ~ReplicaThreads();
  ReplicaThreads(const ReplicaThreads&) = delete;
  ReplicaThreads& operator=(const ReplicaThreads&) = delete;

  void run(const std::function<void(int)>& fn);
  int size() const { return replicas_; }

 private:
  void worker(int r);
  void call(int r);

  int replicas_, omp_threads_;
  Abort abort_;
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable cv_;
  const std::function<void(int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stopping_ = false;
  std::vector<std::exception_ptr> errors_;
};

}  // namespace distrain
