#include "core/train/evaluate.hpp"

namespace distrain {

LossStats evaluate_dataset(Strategy& strategy, const Dataset& data, int64_t batch_size) {
  Loader loader(data, LoaderSpec{batch_size, 1, false, false, 0});
  loader.start(0);
  LossStats total;
  while (auto batch = loader.next()) total += strategy.evaluate(*batch);
  return total;
}

}  // namespace distrain
