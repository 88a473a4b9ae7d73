// Loader: cuts each epoch into global batches and each global batch into per-replica
// slices (the semantics of tf.distribute's experimental_distribute_dataset), with a seeded
// per-epoch shuffle and a background thread that prepares the next batches.
//
// Epoch e's order depends only on (seed, e), so a run resumed at (epoch, batch) sees
// exactly the batches an uninterrupted run would. A partial last batch is dropped
// (drop_remainder) or kept and split as evenly as possible across replicas.
//
// Token data (Dataset::token_data) has Dataset::size() windows per epoch, as many as fit
// the split end to end. Window k of epoch e starts, with shuffle, at an offset drawn
// uniformly from [0, tokens - window - 1] by a generator seeded from (seed, e, k) alone
// (nanoGPT's get_batch, resumable like the shuffle above); without shuffle (evaluation
// always) at k * window, so the windows tile the split in order.
#pragma once
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "datasets/dataset.hpp"

namespace distrain {

struct ReplicaSlice {
  std::vector<float> images;    // (count, example shape...), raw values: [0, 255] from bytes
  std::vector<int32_t> labels;  // (count); token data: (count, window), the token after each input
  std::vector<int32_t> tokens;  // token data: (count, window) input tokens; labels then (count, window)
  // With LoaderSpec::indices_only, the examples' indices in the dataset instead of images:
  // the dataset is on the device (DeviceData), which gathers them.
  std::vector<int32_t> indices;
  int64_t count = 0;

  // Examples [begin, begin + n) of this slice, in every form it holds (a micro-batch).
  ReplicaSlice part(int64_t begin, int64_t n) const;
};

struct Batch {
  int64_t epoch = 0, index = 0;  // index within the epoch
  int64_t global_count = 0;      // examples in this global batch (all replicas, all workers)
  std::vector<ReplicaSlice> replicas;  // this process's replicas only
  int64_t labels_per_example = 1;      // token data: the window (a label per position)
  // What the loss averages over: examples, or tokens of token data.
  int64_t global_labels() const { return global_count * labels_per_example; }
};

struct LoaderSpec {
  int64_t per_replica_batch = 64;
  int replicas = 1;  // in the whole job
  bool shuffle = true;
  bool drop_remainder = false;
  uint64_t seed = 0;
  int prefetch = 2;  // batches prepared ahead
  bool indices_only = false;  // slices carry indices (and labels), not images: see ReplicaSlice; not for token data
  // This process's replicas: [first_replica, first_replica + local_replicas); 0 = all.
  int first_replica = 0, local_replicas = 0;
};

class Loader {
 public:
  Loader(const Dataset& data, LoaderSpec spec);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  int64_t global_batch() const { return spec_.per_replica_batch * spec_.replicas; }
  int64_t batches_per_epoch() const;
  // Starts producing epoch `epoch` from batch `first_batch` (0 unless resuming).
  void start(int64_t epoch, int64_t first_batch = 0);
  // The next batch of the current epoch, or nullopt when it is over.
  std::optional<Batch> next();

 private:
  void produce(int64_t epoch, int64_t first_batch);
  // The dataset's examples in epoch `epoch`'s order; token data: its windows' first tokens.
  std::vector<int64_t> epoch_order(int64_t epoch) const;
  Batch make_batch(const std::vector<int64_t>& order, int64_t epoch, int64_t index) const;
  void fill_examples(ReplicaSlice& s, const std::vector<int64_t>& order, int64_t at) const;
  void fill_windows(ReplicaSlice& s, const std::vector<int64_t>& order, int64_t at) const;
  void stop();

  const Dataset& data_;
  LoaderSpec spec_;
  std::thread worker_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Batch> queue_;
  bool done_ = true, stopping_ = false;
};

}  // namespace distrain
