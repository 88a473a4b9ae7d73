#include "core/comm/local_communicator.hpp"

#include <algorithm>
#include <cstring>

#include "core/base/error.hpp"

namespace distrain {

namespace {
void check_host(const Tensor& t, const char* what) {
  DT_CHECK(t.device.is_cpu(), "local communicator: {} is on {}; it reduces host (cpu) memory only", what, t.device.str());
}
void check_host_f32(const Tensor& t, const char* what) {
  check_host(t, what);
  DT_CHECK(t.dtype == DType::f32, "local communicator: {} is {}, only float32 here", what, dtype_name(t.dtype));
}

// Elements [begin, end) of every rank's input, in rank order, into out.
template <typename T>
void reduce_range(const std::vector<const void*>& inputs, T* out, int64_t begin, int64_t end, ReduceOp op) {
  const auto* first = static_cast<const T*>(inputs[0]);
  std::copy(first + begin, first + end, out + begin);
  for (size_t r = 1; r < inputs.size(); ++r) {
    const auto* in = static_cast<const T*>(inputs[r]);
    if (op == ReduceOp::sum)
      for (int64_t i = begin; i < end; ++i) out[i] += in[i];
    else
      for (int64_t i = begin; i < end; ++i) out[i] = std::max(out[i], in[i]);
  }
}
}  // namespace

LocalGroup::LocalGroup(int size) : size_(size), inputs_(static_cast<size_t>(size), nullptr) {
  DT_CHECK(size > 0, "local group of {} ranks", size);
}

void LocalGroup::abort(const std::string& why) {
  std::lock_guard lock(mutex_);
  if (!aborted_) abort_reason_ = why;
  aborted_ = true;
  cv_.notify_all();
}

void LocalGroup::barrier() {
  std::unique_lock lock(mutex_);
  if (aborted_) throw GroupAborted("stopped: " + abort_reason_);
  const uint64_t gen = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
  if (generation_ == gen) throw GroupAborted("stopped: " + abort_reason_);
}

void LocalCommunicator::do_all_reduce(Tensor inout, ReduceOp op) {
  check_host(inout, "all_reduce tensor");
  DT_CHECK(inout.dtype == DType::f32 || inout.dtype == DType::f64, "local all_reduce of {}", dtype_name(inout.dtype));
  const int64_t n = inout.numel();
  group_->inputs_[static_cast<size_t>(rank_)] = inout.data;
  if (rank_ == 0) group_->scratch_.resize(inout.bytes() / sizeof(float));
  group_->barrier();  // every input posted, scratch sized
  // Each rank reduces its own block of elements; the sum order is the rank order anyway.
  const int64_t begin = n * rank_ / size(), end = n * (rank_ + 1) / size();
  if (inout.dtype == DType::f64)
    reduce_range(group_->inputs_, reinterpret_cast<double*>(group_->scratch_.data()), begin, end, op);
  else
    reduce_range(group_->inputs_, group_->scratch_.data(), begin, end, op);
  group_->barrier();  // scratch complete; nobody reads inputs any more
  std::memcpy(inout.data, group_->scratch_.data(), inout.bytes());
  group_->barrier();  // scratch free for the next collective
}

void LocalCommunicator::do_reduce_scatter(const Tensor& in, Tensor out, ReduceOp op) {
  check_host_f32(in, "reduce_scatter input");
  check_host_f32(out, "reduce_scatter output");
  const int64_t n = out.numel();
  DT_CHECK(in.numel() == n * size(), "reduce_scatter: input {} is not {} x output {}", in.numel(), size(), n);
  group_->inputs_[static_cast<size_t>(rank_)] = in.data;
  if (rank_ == 0) group_->scratch_.resize(static_cast<size_t>(in.numel()));
  group_->barrier();
  reduce_range(group_->inputs_, group_->scratch_.data(), n * rank_, n * (rank_ + 1), op);
  std::memcpy(out.data, group_->scratch_.data() + n * rank_, out.bytes());
  group_->barrier();
}

void LocalCommunicator::do_all_gather(const Tensor& in, Tensor out) {
  check_host(in, "all_gather input");
  check_host(out, "all_gather output");
  check_gathered(in, out, "local");
  group_->inputs_[static_cast<size_t>(rank_)] = in.data;
  group_->barrier();
  for (int r = 0; r < size(); ++r) {
    const auto i = static_cast<size_t>(r);
    std::memcpy(static_cast<char*>(out.data) + in.bytes() * i, group_->inputs_[i], in.bytes());
  }
  group_->barrier();
}

void LocalCommunicator::do_broadcast(Tensor t, int root) {
  check_host(t, "broadcast tensor");
  DT_CHECK(root >= 0 && root < size(), "broadcast root {} of {}", root, size());
  group_->inputs_[static_cast<size_t>(rank_)] = t.data;
  group_->barrier();
  if (rank_ != root) std::memcpy(t.data, group_->inputs_[static_cast<size_t>(root)], t.bytes());
  group_->barrier();
}

int64_t LocalCommunicator::start_send(const Tensor& t, int peer, int tag, std::string_view what) {
  check_host(t, "a message");
  DT_CHECK(peer >= 0 && peer < size() && peer != rank_, "local communicator: sending {} from rank {} to rank {}", what, rank_, peer);
  const auto* bytes = static_cast<const char*>(t.data);
  std::lock_guard lock(group_->mutex_);
  group_->mail_[{rank_, peer, tag}].emplace_back(bytes, bytes + t.bytes());
  group_->cv_.notify_all();
  return 0;
}

void LocalCommunicator::recv(Tensor t, int peer, int tag, std::string_view what) {
  check_host(t, "a message");
  std::unique_lock lock(group_->mutex_);
  auto& queue = group_->mail_[{peer, rank_, tag}];
  group_->cv_.wait(lock, [&] { return !queue.empty() || group_->aborted_; });
  if (queue.empty()) throw GroupAborted("stopped: " + group_->abort_reason_);
  DT_CHECK(queue.front().size() == t.bytes(), "local communicator: {} from rank {} has {} bytes, rank {} expects {}", what, peer,
           queue.front().size(), rank_, t.bytes());
  std::memcpy(t.data, queue.front().data(), t.bytes());
  queue.pop_front();
}

}  // namespace distrain
