// The server side of parameter_server (parameter_server.cpp): server k holds range k of
// the trainable arena (ps_protocol.hpp) and that range's optimizer slots, and answers the
// workers' messages until every worker is done.
//   synchronous (staleness 0): a step's pushes are summed in worker order, whatever the
//     order they came in, and applied once; the next pulls are answered after;
//   otherwise each push is applied as it comes, and a pull for step t waits until the
//     slowest worker is within `staleness` steps of t (no wait when staleness < 0).
// A checkpoint or validation reads a snapshot: the state after every worker's first
// `clock` pushes. Workers ask for it at the same step and push no further until it is
// answered, so the first moment all have pushed `clock` steps is exactly that state; later
// reads (slots, iterations) come from the copy, whatever pushes arrive meanwhile.
// Silence longer than the world's timeout throws a UserError naming the worker that is
// behind (see on_silence for workers that are level).
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/mpi_communicator.hpp"
#include "core/model/model.hpp"
#include "core/optim/optimizer.hpp"
#include "core/strategy/ps_protocol.hpp"
#include "core/strategy/strategy.hpp"

namespace distrain {

class PsServer {
 public:
  // `layout`: a model of the recipe, for variable offsets and initial values (its backend
  // is the host); `world`: every rank, servers first.
  PsServer(MpiCommunicator& world, const PsRanges& ranges, int64_t staleness, Model& layout,
           const OptimizerSpec& optimizer);
  // Initial values of the range: the checkpoint `resume` (values and slots), else
  // `init_from` (values), else the seed's.
  void load(const std::string& resume, const std::string& init_from, uint64_t seed);
  // Answers messages until every worker has sent kDone.
  ServeReport serve();

 private:
  void on_pull(int from);
  void on_push(int from);
  void on_done(int from);
  void on_get(int from);
  void on_snapshot(int from);
  void applied_update(const Tensor& grads, float lr);
  void answer_allowed_pulls();
  void answer_ready_snapshots();
  void take_snapshot(int64_t clock);
  void on_silence(int periods);
  int worker(int rank) const { return rank - ranges_.servers; }

  MpiCommunicator& world_;
  const PsRanges ranges_;
  const int64_t staleness_;
  const int k_;         // this server's index (= its world rank)
  const int64_t lo_, n_;  // its range
  Model& layout_;
  OptimizerSpec optimizer_spec_;
  std::unique_ptr<Optimizer> optimizer_;
  std::vector<float> values_;                   // (n) the range's parameters
  std::vector<float> message_, sum_;            // (n + 1) a push; (n) a synchronous step's sum
  std::vector<std::vector<float>> pushed_;      // synchronous: this step's push of each worker
  std::vector<int64_t> clocks_;                 // per worker: pushes applied (huge once done)
  std::deque<std::pair<int, int64_t>> pulls_;   // pulls not yet answered: (rank, clock)
  std::deque<std::pair<int, int64_t>> snapshot_requests_;  // not yet answered: (rank, clock)
  struct Snapshot {
    int64_t clock = -1;                   // every worker's pushes when it was taken
    int64_t iterations = 0;
    std::vector<float> values;            // (n)
    std::vector<std::vector<float>> slots;  // (slots, n)
  } snapshot_;
  int workers_ = 0, done_ = 0, pushes_this_step_ = 0;
  ServeReport report_;
};

}  // namespace distrain
