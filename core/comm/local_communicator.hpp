// The `local` communicator: N threads of one process exchanging through shared memory.
// all_reduce takes float32 or float64, broadcast any type, the others float32.
// Reductions add the ranks' values in rank order 0, 1, ..., N-1 whatever the timing, so
// results are identical run to run. If one thread fails, abort() wakes the others, which
// throw instead of waiting forever.
#pragma once
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/base/error.hpp"
#include "core/comm/communicator.hpp"

namespace distrain {

// What a rank of an aborted group throws: not a failure of its own, only the echo of
// another rank's (whose error is the one to report).
class GroupAborted : public Error {
 public:
  using Error::Error;
};

class LocalGroup {
 public:
  explicit LocalGroup(int size);
  int size() const { return size_; }
  // Marks the group failed (by `who`, for the message) and wakes every waiting rank.
  void abort(const std::string& why);

 private:
  friend class LocalCommunicator;
  void barrier();  // throws once the group is aborted
  int size_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::string abort_reason_;
  std::vector<const void*> inputs_;  // each rank's tensor for the collective in progress
  std::vector<float> scratch_;       // the reduced result (float64 results use it as bytes)
  // Point-to-point messages not yet received, copied at the send, by (from, to, tag).
  std::map<std::tuple<int, int, int>, std::deque<std::vector<char>>> mail_;
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}
  std::string backend_name() const override { return "local"; }
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  // Sends copy the message into the group's mailbox, so they are done when they return.
  int64_t start_send(const Tensor& t, int peer, int tag, std::string_view what) override;
  void wait_send(int64_t) override {}
  void recv(Tensor t, int peer, int tag, std::string_view what) override;

 private:
  void do_all_reduce(Tensor inout, ReduceOp op) override;
  void do_reduce_scatter(const Tensor& in, Tensor out, ReduceOp op) override;
  void do_all_gather(const Tensor& in, Tensor out) override;
  void do_broadcast(Tensor t, int root) override;
  void do_barrier() override { group_->barrier(); }

  std::shared_ptr<LocalGroup> group_;
  int rank_;
};

}  // namespace distrain
