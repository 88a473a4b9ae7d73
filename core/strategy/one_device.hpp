// one_device: a single replica on a single device (tf.distribute.OneDeviceStrategy).
#pragma once
#include "core/strategy/strategy.hpp"

namespace distrain {

std::unique_ptr<Strategy> make_one_device(const Recipe& recipe);

}  // namespace distrain
