// BatchSource: where StepLoop takes each step's batch from. `train` reads the Loader's
// epochs; `bench` repeats one synthetic batch, so that its figures time the very loop that
// trains, without disk or data loading in them.
#pragma once
#include <optional>

#include "datasets/loader.hpp"

namespace distrain {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Positions the source at batch `first_batch` of epoch `epoch` (0 unless resuming).
  virtual void start(int64_t epoch, int64_t first_batch) = 0;
  // The next batch of the epoch, nullptr when it is over; valid until the next call.
  virtual const Batch* next() = 0;
};

// The Loader's batches, prepared ahead by its thread.
class LoaderBatches final : public BatchSource {
 public:
  explicit LoaderBatches(Loader& loader) : loader_(loader) {}
  void start(int64_t epoch, int64_t first_batch) override { loader_.start(epoch, first_batch); }
  const Batch* next() override {
    current_ = loader_.next();
    return current_ ? &*current_ : nullptr;
  }

 private:
  Loader& loader_;
  std::optional<Batch> current_;
};

// The same batch at every step of every epoch; the loop's plan says when to stop.
class RepeatedBatch final : public BatchSource {
 public:
  explicit RepeatedBatch(const Batch& batch) : batch_(batch) {}
  void start(int64_t, int64_t) override {}
  const Batch* next() override { return &batch_; }

 private:
  const Batch& batch_;
};

}  // namespace distrain
