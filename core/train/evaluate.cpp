#include "core/train/evaluate.hpp"

namespace distrain {

LossStats evaluate_dataset(Strategy& strategy, const Dataset& data, int64_t batch_size, bool on_devices) {
  // Each share is evaluated by its worker(s); the strategy sums over the shares.
  LoaderSpec spec{batch_size, strategy.eval_shares(), false, false, 0};
  spec.indices_only = on_devices;
  spec.first_replica = strategy.eval_share();
  spec.local_replicas = 1;
  Loader loader(data, spec);
  loader.start(0);
  LossStats total;
  while (auto batch = loader.next()) total += strategy.evaluate(*batch);
  return total;
}

}  // namespace distrain
