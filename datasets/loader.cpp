#include "datasets/loader.hpp"

#include <algorithm>
#include <numeric>

#include "core/base/error.hpp"
#include "core/base/rng.hpp"

namespace distrain {

Loader::Loader(const Dataset& data, LoaderSpec spec) : data_(data), spec_(spec) {
  if (spec_.local_replicas == 0) spec_.local_replicas = spec_.replicas - spec_.first_replica;
  DT_CHECK(spec_.per_replica_batch > 0 && spec_.replicas > 0 && spec_.first_replica >= 0 &&
               spec_.first_replica + spec_.local_replicas <= spec_.replicas,
           "bad loader spec");
  DT_CHECK(!(spec_.indices_only && data.token_data()), "token data is kept on the host");
  DT_USER_CHECK(data.size() > 0, "{}: no examples", data.source);
  DT_USER_CHECK(data.size() >= (spec.drop_remainder ? global_batch() : 1),
                "{}: {} examples, fewer than one global batch of {} with drop_remainder", data.source, data.size(),
                global_batch());
}

Loader::~Loader() { stop(); }

int64_t Loader::batches_per_epoch() const {
  const int64_t g = global_batch();
  return spec_.drop_remainder ? data_.size() / g : (data_.size() + g - 1) / g;
}

void Loader::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  queue_.clear();
  stopping_ = false;
}

void Loader::start(int64_t epoch, int64_t first_batch) {
  DT_CHECK(first_batch >= 0 && first_batch <= batches_per_epoch(), "batch {} of an epoch of {}", first_batch,
           batches_per_epoch());
  stop();
  done_ = false;
  worker_ = std::thread([this, epoch, first_batch] { produce(epoch, first_batch); });
}

std::optional<Batch> Loader::next() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return !queue_.empty() || done_; });
  if (queue_.empty()) return std::nullopt;
  Batch b = std::move(queue_.front());
  queue_.pop_front();
  cv_.notify_all();
  return b;
}

std::vector<int64_t> Loader::epoch_order(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(data_.size()));
  if (data_.token_data()) {
    const auto starts = static_cast<uint64_t>(data_.tokens.size()) - static_cast<uint64_t>(data_.window);
    const uint64_t epoch_seed = derive_seed(spec_.seed, 0x70ce0000ULL + static_cast<uint64_t>(epoch));
    // Each window's own generator: its offset depends on (seed, epoch, k) alone.
    for (size_t k = 0; k < order.size(); ++k)
      order[k] = spec_.shuffle ? static_cast<int64_t>(Rng(derive_seed(epoch_seed, k)).below(starts))
                               : static_cast<int64_t>(k) * data_.window;
    return order;
  }
  std::iota(order.begin(), order.end(), 0);
  if (spec_.shuffle) {
    Rng rng(derive_seed(spec_.seed, 0x5eed0000ULL + static_cast<uint64_t>(epoch)));
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  }
  return order;
}

void Loader::produce(int64_t epoch, int64_t first_batch) {
  const std::vector<int64_t> order = epoch_order(epoch);
  for (int64_t b = first_batch; b < batches_per_epoch(); ++b) {
    Batch batch = make_batch(order, epoch, b);
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return stopping_ || static_cast<int>(queue_.size()) < spec_.prefetch; });
    if (stopping_) break;
    queue_.push_back(std::move(batch));
    cv_.notify_all();
  }
  std::lock_guard lock(mutex_);
  done_ = true;
  cv_.notify_all();
}

Batch Loader::make_batch(const std::vector<int64_t>& order, int64_t epoch, int64_t index) const {
  const int64_t begin = index * global_batch();
  const int64_t count = std::min(global_batch(), data_.size() - begin);
  Batch batch{epoch, index, count, std::vector<ReplicaSlice>(static_cast<size_t>(spec_.local_replicas)),
              data_.token_data() ? data_.window : 1};
  // A full batch gives each replica per_replica_batch examples; a partial one is split evenly.
  auto share = [&](int r) { return count / spec_.replicas + (r < count % spec_.replicas ? 1 : 0); };
  int64_t at = begin;
  for (int r = 0; r < spec_.first_replica; ++r) at += share(r);
  for (int local = 0; local < spec_.local_replicas; ++local) {
    ReplicaSlice& s = batch.replicas[static_cast<size_t>(local)];
    s.count = share(spec_.first_replica + local);
    if (data_.token_data()) fill_windows(s, order, at);
    else fill_examples(s, order, at);
    at += s.count;
  }
  return batch;
}

// s.count examples from order[at]: images (or indices) and labels.
namespace {

// Elements [begin, begin + n) of examples of equal size in `all` (count examples).
template <class T>
std::vector<T> examples_of(const std::vector<T>& all, int64_t count, int64_t begin, int64_t n) {
  if (all.empty()) return {};
  const auto per = static_cast<int64_t>(all.size()) / count;
  return std::vector<T>(all.begin() + begin * per, all.begin() + (begin + n) * per);
}

}  // namespace

ReplicaSlice ReplicaSlice::part(int64_t begin, int64_t n) const {
  DT_CHECK(begin >= 0 && n >= 0 && begin + n <= count, "examples [{}, +{}) of a slice of {}", begin, n, count);
  if (n == 0) return {};
  return ReplicaSlice{examples_of(images, count, begin, n), examples_of(labels, count, begin, n),
                      examples_of(tokens, count, begin, n), examples_of(indices, count, begin, n), n};
}

void Loader::fill_examples(ReplicaSlice& s, const std::vector<int64_t>& order, int64_t at) const {
  const int64_t per = data_.example_shape.numel();
  s.labels.resize(static_cast<size_t>(s.count));
  if (!spec_.indices_only) s.images.resize(static_cast<size_t>(s.count * per));
  for (int64_t i = 0; i < s.count; ++i) {
    const int64_t src = order[static_cast<size_t>(at + i)];
    s.labels[static_cast<size_t>(i)] = data_.labels[static_cast<size_t>(src)];
    if (spec_.indices_only) {
      s.indices.push_back(static_cast<int32_t>(src));
      continue;
    }
    float* dst = s.images.data() + i * per;
    if (data_.floats.empty()) {
      const uint8_t* px = data_.pixels.data() + src * per;
      for (int64_t j = 0; j < per; ++j) dst[j] = px[j];
    } else {
      std::copy_n(data_.floats.data() + src * per, per, dst);
    }
  }
}

// s.count windows starting at order[at]...: their tokens, and the tokens one further on.
void Loader::fill_windows(ReplicaSlice& s, const std::vector<int64_t>& order, int64_t at) const {
  const int64_t w = data_.window;
  s.tokens.resize(static_cast<size_t>(s.count * w));
  s.labels.resize(static_cast<size_t>(s.count * w));
  for (int64_t i = 0; i < s.count; ++i) {
    const int32_t* src = data_.tokens.data() + order[static_cast<size_t>(at + i)];
    std::copy_n(src, w, s.tokens.data() + i * w);
    std::copy_n(src + 1, w, s.labels.data() + i * w);
  }
}

}  // namespace distrain
