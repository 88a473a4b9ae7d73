// A training step measured as `distrain bench` measures it: the Trainer's own step loop
// (StepLoop, via time_steps in step_timing.hpp) on a fixed synthetic batch of the recipe's
// input shape, so figures do not depend on disk or data loading: the median step after
// warm-up (on a GPU, the median of 16-step windows' means, as the device runs ahead of the
// host between reads of the steps' figures), with its memory, traffic, pipeline idle and
// update figures. `plan` times its profile and calibration steps with it too.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/io/recipe.hpp"
#include "core/strategy/strategy.hpp"
#include "core/train/step_profile.hpp"

namespace distrain {

struct MeasureOptions {
  int64_t steps = 50, warmup = 5;
  int64_t read_every = 0;  // 0: 16 on a GPU, 1 on the CPU
  bool profile = false;    // the step per layer (step_profile.hpp)
  bool alone = false;  // a one-process strategy in a launched job (make_strategy's alone_in_job)
  bool reference_bandwidth = true;  // the update's figures with an axpby pass beside them (plan's steps skip it)
};

struct Measured {
  MemoryUse memory;  // per replica
  int64_t device_peak = 0;  // the high-water mark of replica 0's device (DeviceMemory)
  std::string device;
  std::vector<std::pair<int64_t, int64_t>> replica_memory;  // per replica of the job: measured peak, predicted
  std::string strategy;
  int replicas = 1, threads = 1;
  int64_t global_batch = 0, steps = 0, read_every = 1;
  int64_t tokens_per_example = 1;  // a language model's window: its rate is also in tokens
  double images_per_sec = 0, min_ms = 0, median_ms = 0, max_ms = 0, comm_share = 0;
  // Adam's update: the median time, the parameters this process updates, where (device or
  // host), and the memory bandwidth an axpby reached in the same run, for comparison.
  double update_ms = 0, reference_gbps = 0;
  int64_t updated = 0;
  std::string update_place;
  // Bytes this rank's collectives sent per step (CommTraffic), and theory's figure.
  double data_bytes = 0, data_collectives = 0, tensor_bytes = 0, tensor_collectives = 0;
  TrafficTheory theory;
  // Pipeline stages: the median idle share per stage, theory's, activations held per stage.
  std::vector<double> stage_idle;
  std::vector<int64_t> stage_activations;
  double idle_theory = 0;
  std::string pipeline;  // "P stages, M micro-batches, schedule S"
  std::optional<StepProfile> profile;  // with --profile
};

// The median of `v` (the mean of the middle two of an even count).
double median_value(std::vector<double> v);

// One point, in this process (and its MPI peers when launched so). `rank`: this process's
// worker rank, -1 on a parameter server's server (which serves and reports nothing).
Measured measure_steps(const Recipe& recipe, const MeasureOptions& options, int& rank);

// `recipe` must be a one_device recipe; `steps` timed after `warmup`.
StepProfile profile_on_one_device(const Recipe& recipe, int64_t steps, int64_t warmup);

// The median of `steps` steps of `recipe` after `warmup`, on the ranks of the job this
// process was launched in (every rank calls it): rank 0's median, which waits for every
// rank's part of a step.
double median_step_ms_in_job(const Recipe& recipe, int64_t steps, int64_t warmup);

}  // namespace distrain
