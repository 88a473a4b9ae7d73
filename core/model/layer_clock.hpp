// LayerClock: the wall time of each layer's forward and backward calls, summed until
// take(), for `distrain bench --profile`. A Model given one (Model::set_layer_clock) times
// each layer's call; a Model without one pays a pointer test per layer and nothing else.
//
// Host time only: right where a layer's work is done when its call returns, as on the CPU
// backend. A GPU backend queues kernels and returns at once, so its layers would need a
// device sync each to be timed (which would also change the step being measured); `bench
// --profile` refuses cuda devices rather than print such figures.
#pragma once
#include <chrono>
#include <cstddef>
#include <vector>

namespace distrain {

// Milliseconds per layer, in the model's layer order.
struct LayerMillis {
  std::vector<double> forward, backward;
};

class LayerClock {
 public:
  explicit LayerClock(size_t layers) { reset(layers); }

  // Around one layer's call, on the thread that runs the model.
  void start() { started_ = Clock::now(); }
  void stop_forward(size_t layer) { spent_.forward.at(layer) += since_start(); }
  void stop_backward(size_t layer) { spent_.backward.at(layer) += since_start(); }

  // What was spent since the last take() (a pipeline stage's several micro-batches add up);
  // starts again from zero.
  LayerMillis take() {
    LayerMillis out = std::move(spent_);
    reset(out.forward.size());
    return out;
  }

 private:
  using Clock = std::chrono::steady_clock;
  double since_start() const { return std::chrono::duration<double, std::milli>(Clock::now() - started_).count(); }
  void reset(size_t layers) { spent_ = LayerMillis{std::vector<double>(layers), std::vector<double>(layers)}; }

  Clock::time_point started_;
  LayerMillis spent_;
};

}  // namespace distrain
