// StepLedger: what the training steps left to be read. Each replica's loss kernel writes
// its loss sum and correct count into a row of slots on its own device, and the reduced
// gradients leave the evidence whether they are finite; the host reads the rows of many
// steps at once, when the run needs their figures (a line of progress, a checkpoint, the
// epoch's end). A GPU then runs step after step without waiting for the host. Values the
// host has at once (a strategy that reduces through the host) are recorded as they are.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "core/model/loss.hpp"
#include "core/tensor/buffer.hpp"

namespace distrain {

// A step as the ledger read it.
struct StepResult {
  int64_t step = 0;    // 1-based: the optimizer steps done once it ran
  LossStats stats;     // this process's replicas (Strategy::read_steps sums over workers)
  bool finite = true;  // the loss and the reduced gradients
  std::optional<double> grad_norm;  // their global norm before clipping (optimizer.clip_norm)
};

class StepLedger {
 public:
  // The most steps it holds unread.
  static constexpr int64_t kCapacity = 64;

  // Replica `source` (0, 1, ... in order) writes its losses on `backend`.
  int add_source(Backend& backend);

  // Opens the row of the step about to run; the calls below fill it until commit().
  void begin_step();
  // Where `source` writes its (2,) float32 loss sum and correct count over `examples`
  // examples (none: it writes nothing and counts nothing).
  Tensor loss_slot(int source, int64_t examples);
  // The step's losses as the host has them already (instead of slots).
  void record_losses(const LossStats& stats);
  // Whether the step is finite, decided on the host.
  void check(bool finite);
  // Whether `grads` (the reduced gradients, the same on every replica) are finite: scanned
  // now on the host; on a device, their column sums (any NaN or infinity makes its
  // column's sum non-finite) go to a slot, unread.
  void check(Backend& backend, const Tensor& grads);
  // The global norm of the open step's gradients, before clipping.
  void record_grad_norm(double norm);
  // The open row's losses now (waiting for their devices): for a strategy that decides
  // whether to apply the step before it updates.
  LossStats losses_now();
  void commit(int64_t step);
  // Forgets the open row: the step did not complete (an exception left it).
  void drop_open_step();

  int64_t unread() const { return static_cast<int64_t>(rows_.size()); }
  // Whether an unread step is known on the host to be non-finite already.
  bool holds_known_failure() const;
  // The committed steps since the last read, in order (one download per device).
  std::vector<StepResult> read();

 private:
  enum class Check { none, finite, not_finite, on_device };
  struct Row {
    int64_t step = 0;
    std::vector<int64_t> examples;        // per source
    std::optional<LossStats> host_losses;  // recorded instead of slots
    Check check = Check::none;
    std::optional<double> grad_norm;
  };
  struct Source {
    Backend* backend;
    Buffer slots;  // (kCapacity, 2)
  };
  // The row's losses: recorded, or its sources' slots in source order, pair(s) pointing at
  // source s's two values (read to the host).
  template <class PairOf>
  static LossStats row_losses(const Row& row, PairOf pair);

  std::vector<Source> sources_;
  Backend* check_backend_ = nullptr;
  Buffer check_slots_;  // (kCapacity, kFinitenessColumns) on check_backend_
  std::vector<Row> rows_;
  bool open_ = false;
};

}  // namespace distrain
