#include "core/train/evaluate.hpp"

namespace distrain {

LossStats evaluate_dataset(Strategy& strategy, const Dataset& data, int64_t batch_size) {
  // Each worker evaluates its share; the strategy sums over workers.
  LoaderSpec spec{batch_size, strategy.workers(), false, false, 0};
  spec.first_replica = strategy.rank();
  spec.local_replicas = 1;
  Loader loader(data, spec);
  loader.start(0);
  LossStats total;
  while (auto batch = loader.next()) total += strategy.evaluate(*batch);
  return total;
}

}  // namespace distrain
