// LayerClock: the wall time of each layer's forward and backward calls, summed until
// take(), for `distrain bench --profile`. A Model given one (Model::set_layer_clock) times
// each layer's call; a Model without one pays a pointer test per layer and nothing else.
//
// Host time, after `settle` (a device sync) at both ends of each call: a GPU backend queues
// kernels and returns at once, so its layer's time is known only once its stream is
// drained. The syncs keep the host from running ahead, so on a GPU the parts of a step
// add up to more than an unprofiled step takes (launch gaps are counted, overlap is not).
#pragma once
#include <chrono>
#include <cstddef>
#include <functional>
#include <vector>

namespace distrain {

// Milliseconds per layer, in the model's layer order.
struct LayerMillis {
  std::vector<double> forward, backward;
};

class LayerClock {
 public:
  explicit LayerClock(size_t layers, std::function<void()> settle = {}) : settle_(std::move(settle)) { reset(layers); }

  // Around one layer's call, on the thread that runs the model.
  void start() {
    if (settle_) settle_();
    started_ = Clock::now();
  }
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
  double since_start() const {
    if (settle_) settle_();
    return std::chrono::duration<double, std::milli>(Clock::now() - started_).count();
  }
  void reset(size_t layers) { spent_ = LayerMillis{std::vector<double>(layers), std::vector<double>(layers)}; }

  std::function<void()> settle_;
  Clock::time_point started_;
  LayerMillis spent_;
};

}  // namespace distrain
