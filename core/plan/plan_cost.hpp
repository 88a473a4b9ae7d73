// The step time `distrain plan` predicts for a layout: each layer's forward and backward
// time measured on this machine at the layout's micro-batch (one thread, one device),
// divided over the tensor ranks where the layer is split; the tensor axis's collectives as
// each layer says it makes them (Layer::tensor_traffic), the pipeline's messages
// between stages and the data axis's gradient all-reduce, each as latency + bytes over the
// link it crosses (ring all-reduce: 2(n-1)/n of the bytes; one through both links at the rate
// measured on the whole job, else its slowest hop's; the data groups that cross hosts share
// a host's link; a stage's messages overlap the next micro-batch's work, so a micro-batch
// takes the longer of the two); the pipeline's bubble, from its schedule simulated op by
// op (plan_pipeline.hpp: ranks of other stages on a host use its cores while one waits);
// ZeRO-2 and -3's per-layer reduce-scatters and all-gathers; the optimizer update on the
// rank's share of the weights.
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/plan/plan_layouts.hpp"
#include "core/io/recipe.hpp"
#include "core/model/model.hpp"

namespace distrain {

// A reduce-scatter's and an all-gather's rates, each as half a ring all-reduce's: n ranks
// take (n - 1)(latency + bytes / n / rate) for the whole's bytes.
struct ShardRates {
  double scatter_bytes_per_s = 0, gather_bytes_per_s = 0;
  bool measured() const { return scatter_bytes_per_s > 0 && gather_bytes_per_s > 0; }
  ShardRates times(double factor) const { return {scatter_bytes_per_s * factor, gather_bytes_per_s * factor}; }
};

struct Links {
  double intra_bytes_per_s = 10e9, inter_bytes_per_s = 1.25e9;  // 10 GB/s, 10 Gbit/s
  double intra_latency_s = 5e-6, inter_latency_s = 50e-6;
  // Pipeline messages' rate where measured (--measure; an MPI all-reduce of two ranks may
  // send the whole buffer each way), else 0: the link's. Across hosts it is a host link's,
  // which the pairs of ranks that send over it at once share.
  double intra_message_bytes_per_s = 0, inter_message_bytes_per_s = 0;
  // ZeRO's collectives' rates where measured (--measure; MPI picks other algorithms for them
  // than for an all-reduce, and not the same for both), else 0: the link's.
  ShardRates intra_shard, inter_shard;
  // A ring through both links (ranks of one host and of others), all-reduce's and ZeRO's
  // rates and its latency, where measured on the whole job (--measure; on shared cores a
  // host's ranks move both links' bytes at once), else 0: its slower link's.
  double both_bytes_per_s = 0, both_latency_s = 0;
  ShardRates both_shard;
  std::string str() const;
};

// "intra=10GB/s,inter=100Mbit/s" (units B, KB, MB, GB or bit, Kbit, Mbit, Gbit per s;
// either side may be left out). Throws UserError naming --links.
Links parse_links(const std::string& text);

// One micro-batch size's profile: each layer's forward and backward milliseconds (by layer
// name), and the optimizer update's for the whole model.
struct LayerTimes {
  std::map<std::string, std::pair<double, double>> layer_ms;
  double update_ms = 0;
  double step_ms = 0;  // the rest of a step (loss, zeroing gradients, the finiteness check)
  int64_t value_bytes = 0;  // the whole model's trainable values
};

// The mean of rounds' profiles of one micro-batch size, field by field.
LayerTimes mean_of(const std::vector<LayerTimes>& rounds);

struct StepEstimate {
  double compute_ms = 0, tensor_ms = 0, pipe_ms = 0, bubble_ms = 0, data_ms = 0, update_ms = 0, other_ms = 0;
  // What rank 0 sends along the tensor axis in a step, as `bench` counts it, and what a
  // rank with the most weights sends along the data axis (rank 0 without a pipeline).
  double rank0_tensor_bytes = 0, rank0_tensor_collectives = 0, data_bytes = 0;
  double total_ms() const { return compute_ms + tensor_ms + pipe_ms + bubble_ms + data_ms + update_ms + other_ms; }
};

// The largest message a pipeline stage may send for `batch` examples: the widest output of
// a layer but the last (float32).
int64_t largest_stage_message_bytes(const Model& model, int64_t batch);

// How many of `model`'s layers hold trainable weights: ZeRO's collectives per pass.
int layers_with_weights(const Model& model);

// How a rank computes against the profile, which one process ran alone: the ranks of a
// host that take turns on one core, and where measured (plan --measure; 0 where not) how
// much slower than the profile a real step on the cluster computes (calibrate_on_steps):
// besides the turns, a machine with all its cores busy is slower than with one, and ranks
// sharing a core lose more inside a step. Tensor peers share a host's cores in lock-step,
// a pipeline's stages by turns, and may lose differently: layouts with a tensor axis take
// a slowdown of their own where measured.
// Also measured: what a step whose data group spans the calibration's links waits beyond
// its collectives' price, as a share of its compute (the data axis's all-reduce waits for
// the slower host's ranks, which compute that much longer).
struct CoreSharing {
  double ranks_per_core = 1;
  double measured_slowdown = 0;
  double data_wait_share = 0;
  double tensor_slowdown = 0;
  double profile_scale(const PlanLayout& l) const {
    if (l.tensor > 1 && tensor_slowdown > 0) return tensor_slowdown;
    return measured_slowdown > 0 ? measured_slowdown : ranks_per_core;
  }
  // " (2.13x with a tensor axis)" where measured, else "".
  std::string tensor_note() const;
};

// `recipe`: the layout's (layout_recipe); `rank_value_bytes`: the most bytes of trainable
// values a rank holds.
StepEstimate estimate_step(const Recipe& recipe, const PlanLayout& layout, const Cluster& cluster, const Links& links,
                           const LayerTimes& times, int64_t rank_value_bytes, const CoreSharing& cores);

// The slowdown at which estimate_step gives `measured_ms` for `recipe` as `layout` (the
// estimate grows with it: a pipeline's too), `cores` otherwise: its `slowdown` field
// (measured_slowdown, or tensor_slowdown for a layout with a tensor axis); at least 1.
double slowdown_for_step(const Recipe& recipe, const PlanLayout& layout, const Cluster& cluster, const Links& links,
                         const LayerTimes& times, CoreSharing cores, double CoreSharing::*slowdown, double measured_ms);

// What a step of `recipe` as `layout` measured beyond estimate_step's price at `cores`'
// slowdown, as a share of its compute (CoreSharing::data_wait_share when `layout` has a
// data axis), at least 0.
double data_wait_for_step(const Recipe& recipe, const PlanLayout& layout, const Cluster& cluster, const Links& links,
                          const LayerTimes& times, const CoreSharing& cores, double measured_ms);

}  // namespace distrain
