#include "core/plan/plan_cost.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <set>
#include <vector>

#include "core/plan/plan_pipeline.hpp"
#include "core/backend/backend.hpp"
#include "core/base/dtype.hpp"
#include "core/base/error.hpp"
#include "core/model/model.hpp"
#include "core/model/no_storage.hpp"
#include "core/model/stage_partition.hpp"
#include "core/strategy/replica.hpp"

namespace distrain {

namespace {

// Activations, gradients and messages in float32.
constexpr double kFloatBytes = static_cast<double>(dtype_size(DType::f32));

// One link's figures: the hosts' or a host's own.
struct Link {
  double bytes_per_s, latency_s;
  double seconds(double bytes) const { return latency_s + bytes / bytes_per_s; }
};

Link link(const Links& links, bool across_hosts, int sharing = 1) {
  return across_hosts ? Link{links.inter_bytes_per_s / sharing, links.inter_latency_s}
                      : Link{links.intra_bytes_per_s, links.intra_latency_s};
}

// A pipeline message's link, `sharing` pairs of ranks sending over a host's link at once.
Link message_link(const Links& links, bool across_hosts, int sharing) {
  Link l = link(links, across_hosts, sharing);
  const double measured = across_hosts ? links.inter_message_bytes_per_s / sharing : links.intra_message_bytes_per_s;
  if (measured > 0) l.bytes_per_s = measured;
  return l;
}

// ZeRO's two collectives over one link: the reduce-scatters and the all-gathers.
struct ShardLink {
  Link scatter, gather;
};

ShardLink shard_link(const Links& links, bool across_hosts, int sharing) {
  const Link l = link(links, across_hosts, sharing);
  const ShardRates& measured = across_hosts ? links.inter_shard : links.intra_shard;
  if (!measured.measured()) return {l, l};
  const ShardRates rates = measured.times(1.0 / (across_hosts ? sharing : 1));
  return {Link{rates.scatter_bytes_per_s, l.latency_s}, Link{rates.gather_bytes_per_s, l.latency_s}};
}

Link slower(const Link& a, const Link& b) { return a.bytes_per_s <= b.bytes_per_s ? a : b; }

// A ring that passes between ranks of one host and between hosts: as measured on the
// whole job, else as fast as its slowest hop; its all-reduce, then ZeRO's collectives.
Link ring_on_both_links(const Links& links, int sharing) {
  if (links.both_bytes_per_s > 0) return Link{links.both_bytes_per_s, links.both_latency_s};
  return slower(link(links, true, sharing), link(links, false));
}

ShardLink shards_on_both_links(const Links& links, int sharing) {
  const ShardRates& measured = links.both_shard;
  const double latency_s = links.both_latency_s;
  if (measured.measured())
    return {Link{measured.scatter_bytes_per_s, latency_s}, Link{measured.gather_bytes_per_s, latency_s}};
  const ShardLink across = shard_link(links, true, sharing), local = shard_link(links, false, 1);
  return {slower(across.scatter, local.scatter), slower(across.gather, local.gather)};
}

// `collectives` reduce-scatters (or all-gathers) of `bytes` in all among n ranks, each half
// a ring all-reduce: (n - 1)(latency + its bytes / n / bandwidth).
double half_rings_s(const Link& l, double collectives, double bytes, int n) {
  return n <= 1 ? 0.0 : (n - 1) * (collectives * l.latency_s + bytes / n / l.bytes_per_s);
}

double per_s(const std::string& amount, const std::string& unit, const std::string& text) {
  static const std::map<std::string, double> kUnits = {
      {"B", 1},       {"KB", 1e3},       {"MB", 1e6},       {"GB", 1e9},      {"KiB", 1024.0},  {"MiB", 1048576.0},
      {"GiB", 1073741824.0}, {"bit", 0.125}, {"Kbit", 125.0}, {"Mbit", 125e3}, {"Gbit", 125e6}};
  const auto u = kUnits.find(unit);
  DT_USER_CHECK(u != kUnits.end(), "--links {}: unknown unit '{}/s' (B, KB, MB, GB, KiB, MiB, GiB, bit, Kbit, Mbit or Gbit per s)",
                text, unit);
  // From a modem to past any network built: outside it a rate is a typo, and times computed
  // from it overflow what can be printed.
  constexpr double kSlowest = 125, kFastest = 1.25e13;  // 1 Kbit/s, 100 Tbit/s
  const double v = std::strtod(amount.c_str(), nullptr) * u->second;  // inf or 0 past double's range: refused below
  DT_USER_CHECK(v >= kSlowest && v <= kFastest, "--links {}: a link's bandwidth must be between 1Kbit/s and 100000Gbit/s",
                text);
  return v;
}

// Collectives a rank makes: how many, the bytes it sends in them (counted as Communicator
// counts them: an all-reduce 2(n - 1)/n of its buffer, a reduce-scatter or an all-gather
// (n - 1)/n of the whole) and their time over a link (a reduce-scatter or an all-gather is
// half a ring all-reduce).
struct Sent {
  double collectives = 0, bytes = 0, seconds = 0;
  void add(TensorCollective::Kind kind, double whole_bytes, const Link& l, int n) {
    const bool all_reduce = kind == TensorCollective::Kind::all_reduce;
    collectives += 1;
    bytes += (all_reduce ? 2 : 1) * whole_bytes * (n - 1) / n;
    seconds += (all_reduce ? 2 : 1) * half_rings_s(l, 1, whole_bytes, n);  // a ring all-reduce is two halves
  }
  void add(const std::vector<TensorCollective>& pass, int64_t examples, const Link& l, int n) {
    for (const TensorCollective& c : pass)
      add(c.kind, static_cast<double>(c.elements * examples) * kFloatBytes, l, n);
  }
};

// A micro-batch's time on one rank of a stage, in seconds: compute, and the tensor axis's
// collectives as each layer says it makes them (Layer::tensor_traffic; a rerun forward's
// again in backward), with the vocabulary-parallel loss's two all-reduces on the last stage.
struct StageTime {
  double forward_s = 0, backward_s = 0, pipe_s = 0;
  Sent tensor_forward, tensor_backward;
  double compute_s() const { return forward_s + backward_s; }
  double tensor_s() const { return tensor_forward.seconds + tensor_backward.seconds; }
  // Messages between stages are sent while the next micro-batch computes, activations one
  // way and gradients the other: a slot is the longer of the work and one message.
  double total() const { return std::max(compute_s() + tensor_s(), pipe_s); }
};

StageTime stage_time(const Model& whole, size_t first, size_t end, const PlanLayout& l, int64_t micro, const Links& links,
                     const LayerTimes& times, double profile_scale) {
  StageTime st;
  const Link tensor = link(links, false);
  for (size_t i = first; i < end; ++i) {
    const Layer& layer = *whole.layers()[i];
    const TensorPlace& place = layer.tensor_place();
    const bool split = place.split != TensorSplit::none || (place.sequence && l.sequence_parallel);
    const bool rerun = whole.reruns_forward(i);
    if (const auto it = times.layer_ms.find(layer.name()); it != times.layer_ms.end()) {
      const double per_ms = profile_scale / 1e3 / (split ? l.tensor : 1);  // the profile's ms to this rank's s
      st.forward_s += it->second.first * per_ms;
      st.backward_s += (it->second.second + (rerun ? it->second.first : 0)) * per_ms;  // a rerun forward too
    }
    if (l.tensor == 1) continue;
    const TensorTraffic sent = layer.tensor_traffic(whole.makes_input_gradient(i));
    st.tensor_forward.add(sent.forward, micro, tensor, l.tensor);
    st.tensor_backward.add(sent.backward, micro, tensor, l.tensor);
    if (rerun) st.tensor_backward.add(sent.forward, micro, tensor, l.tensor);
  }
  if (l.tensor > 1 && end == whole.layers().size() && whole.output_first_class()) {  // the loss: row maxima, then sums
    const Shape& out = whole.output_shape();
    const double rows = static_cast<double>(out.numel() / out[out.rank() - 1] * micro);
    st.tensor_forward.add(TensorCollective::Kind::all_reduce, rows * kFloatBytes, tensor, l.tensor);
    st.tensor_forward.add(TensorCollective::Kind::all_reduce, 2 * rows * kFloatBytes, tensor, l.tensor);
  }
  return st;
}

// Once a step, the gradients of the weights that sequence parallelism keeps whole on every
// rank (layer norms') are summed over the tensor axis (Model::sum_sequence_shard_gradients).
Sent sequence_shard_gradients(const Model& whole, size_t first, size_t end, const PlanLayout& l, const Links& links) {
  Sent sent;
  if (l.tensor == 1) return sent;
  for (size_t i = first; i < end; ++i) {
    const TensorPlace& p = whole.layers()[i]->tensor_place();
    const Range& weights = whole.trainable_ranges()[i];
    if (p.sequence && p.split == TensorSplit::none && !weights.empty())
      sent.add(TensorCollective::Kind::all_reduce, static_cast<double>(weights.size()) * kFloatBytes, link(links, false),
               l.tensor);
  }
  return sent;
}

// A stage's layers with weights and its trainable elements; of them, those a rerun forward
// gathers again under ZeRO-3 (recomputation's inner layers) and their share of the elements.
struct StageWeights {
  double layers = 0, elements = 0, rerun_layers = 0, rerun_share = 0;
};

StageWeights stage_weights(const Model& whole, size_t first, size_t end) {
  StageWeights w;
  double rerun = 0;
  for (size_t i = first; i < end; ++i) {
    const auto size = static_cast<double>(whole.trainable_ranges()[i].size());
    if (size == 0) continue;
    w.layers += 1, w.elements += size;
    if (!whole.reruns_forward(i)) continue;
    w.rerun_layers += 1, rerun += size;
  }
  w.rerun_share = w.elements > 0 ? rerun / w.elements : 0;
  return w;
}

// ZeRO's collectives over the data axis (stages 1-3, the mesh's shard_optimizer), one per
// layer with weights each time: every layer's gradients reduce-scattered (stages 2, 3: at
// each micro-batch's backward) and its weights all-gathered, after the update (stages 1,
// 2) or before each micro-batch's forward and again before its backward (stage 3; under
// recomputation the layers it reruns a third time, for the rerun forward); each half of a
// ring all-reduce at its kind's rate, on the stage with the most weights. Under bf16 ZeRO
// and shard_optimizer gather the weights in bf16 (zero_gatherers.hpp): half the bytes.
// Left out: ZeRO-3 gathers a tied table once more for the layer that shares it (GPT's head:
// 0.7% of the Shakespeare GPT's bytes).
Sent zero_collectives(const ShardLink& l, const StageWeights& weights, double value_bytes, const PlanLayout& layout) {
  const int n = layout.data;
  if (n <= 1) return {};
  const auto m = static_cast<double>(layout.micro_batches);
  const bool regathers = layout.zero_stage == 3 && layout.recompute;
  const double scatters = layout.zero_stage >= 2 ? m : 1, gathers = layout.zero_stage == 3 ? 2 * m : 1;
  const double gathered = layout.bf16 ? 0.5 : 1.0;
  const double scatter_collectives = scatters * weights.layers,
               gather_collectives = gathers * weights.layers + (regathers ? m * weights.rerun_layers : 0);
  const double scatter_bytes = scatters * value_bytes,
               gather_bytes = (gathers + (regathers ? m * weights.rerun_share : 0)) * gathered * value_bytes;
  Sent sent;
  sent.collectives = scatter_collectives + gather_collectives;
  sent.bytes = (scatter_bytes + gather_bytes) * (n - 1) / n;
  sent.seconds = half_rings_s(l.scatter, scatter_collectives, scatter_bytes, n) +
                 half_rings_s(l.gather, gather_collectives, gather_bytes, n);
  return sent;
}

// The data groups with ranks on one host, which share its link when they cross hosts: one
// per (tensor, stage) coordinate there.
int data_groups_on_a_host(const PlanLayout& l, const Cluster& cluster) {
  std::set<std::pair<int, int>> groups;
  for (int r = 0; r < cluster.per_host(); ++r) groups.insert({r % l.tensor, r / (l.tensor * l.data)});
  return static_cast<int>(groups.size());
}

// The hosts stage s's ranks are on, and how many on each (ranks of a stage are contiguous:
// stage-major, then data, then tensor).
std::vector<std::pair<int, int>> stage_ranks_on_hosts(const PlanLayout& l, const Cluster& cluster, int s) {
  std::map<int, int> on;
  const int stride = l.tensor * l.data;
  for (int r = s * stride; r < (s + 1) * stride; ++r) ++on[cluster.host_of(r)];
  return {on.begin(), on.end()};
}

// The most pairs of stage s's and stage s + 1's ranks whose messages leave one host at
// once (each stage rank sends to the same place in the next stage): 0 where the two stages
// share their hosts.
int stage_pairs_on_a_link(const PlanLayout& l, const Cluster& cluster, int s) {
  const int stride = l.tensor * l.data;
  std::map<int, int> forward, backward;  // by the sending host: activations, input gradients
  for (int r = s * stride; r < (s + 1) * stride; ++r) {
    if (cluster.host_of(r) == cluster.host_of(r + stride)) continue;
    ++forward[cluster.host_of(r)];
    ++backward[cluster.host_of(r + stride)];
  }
  int most = 0;
  for (const auto* by_host : {&forward, &backward})
    for (const auto& [host, pairs] : *by_host) most = std::max(most, pairs);
  return most;
}

// Whether rank 0's data group has other ranks on its own host besides ranks elsewhere.
bool data_group_on_both_links(const PlanLayout& l, const Cluster& cluster) {
  int on_first_host = 0;
  for (int d = 0; d < l.data; ++d) on_first_host += cluster.host_of(d * l.tensor) == cluster.host_of(0) ? 1 : 0;
  return on_first_host > 1 && on_first_host < l.data;
}

// Whether a layout's data group waits as plan --measure's calibration step measured (its
// data N crosses hosts where the cluster has several): one that crosses too waits for the
// slower host's ranks at the all-reduce; one inside a host, its ranks in turn on shared
// cores, arrives together.
bool waits_like_calibration(const PlanLayout& l, const Cluster& cluster, bool data_across) {
  return l.data > 1 && (data_across || cluster.hosts == 1);
}

}  // namespace

int64_t largest_stage_message_bytes(const Model& model, int64_t batch) {
  const std::vector<Shape>& shapes = model.layer_shapes();
  int64_t most = 0;
  for (size_t i = 0; i + 1 < shapes.size(); ++i) most = std::max(most, shapes[i].numel());
  return most * batch * static_cast<int64_t>(kFloatBytes);
}

int layers_with_weights(const Model& model) {
  const auto& ranges = model.trainable_ranges();
  return static_cast<int>(std::count_if(ranges.begin(), ranges.end(), [](const Range& r) { return !r.empty(); }));
}

std::string CoreSharing::tensor_note() const {
  return tensor_slowdown > 0 ? fmt::format(" ({:.2f}x with a tensor axis)", tensor_slowdown) : "";
}

std::string Links::str() const {
  const auto shards = [](const ShardRates& r) {
    return fmt::format("reduce-scatter {:.3g} GB/s, all-gather {:.3g} GB/s", r.scatter_bytes_per_s / 1e9,
                       r.gather_bytes_per_s / 1e9);
  };
  const auto measured = [&](double message, const ShardRates& shard) {
    std::string s;
    if (message > 0) s += fmt::format(" (messages {:.3g} GB/s", message / 1e9);
    if (shard.measured()) s += (s.empty() ? " (" : ", ") + shards(shard);
    return s.empty() ? s : s + ")";
  };
  const std::string both = both_bytes_per_s <= 0 ? ""
      : fmt::format(", a ring through both {:.3g} GB/s ({}) and {:.3g} us", both_bytes_per_s / 1e9, shards(both_shard),
                    both_latency_s * 1e6);
  return fmt::format("intra-host {:.3g} GB/s{} and {:.3g} us, inter-host {:.3g} GB/s ({:.3g} Gbit/s){} and {:.3g} us{}",
                     intra_bytes_per_s / 1e9, measured(intra_message_bytes_per_s, intra_shard),
                     intra_latency_s * 1e6, inter_bytes_per_s / 1e9, inter_bytes_per_s * 8 / 1e9,
                     measured(inter_message_bytes_per_s, inter_shard), inter_latency_s * 1e6, both);
}

Links parse_links(const std::string& text) {
  Links links;
  static const std::regex kPart(R"(\s*(intra|inter)\s*=\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]+)/s\s*)");
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string part = text.substr(start, comma - start);
    std::smatch m;
    DT_USER_CHECK(std::regex_match(part, m, kPart), "--links {}: expected intra=RATE/s,inter=RATE/s (e.g. intra=10GB/s,"
                  "inter=100Mbit/s), got '{}'", text, part);
    (m[1] == "intra" ? links.intra_bytes_per_s : links.inter_bytes_per_s) = per_s(m[2], m[3], text);
    start = comma + 1;
  }
  return links;
}

StepEstimate estimate_step(const Recipe& recipe, const PlanLayout& l, const Cluster& cluster, const Links& links,
                           const LayerTimes& times, int64_t rank_value_bytes, const CoreSharing& cores) {
  Model whole(recipe.model(), backend_for(Device{}), storage_free_seams(), tensor_group_of(recipe, 0, l.tensor));
  whole.set_recompute(l.recompute);  // which layers backward reruns
  const StagePlan plan = plan_stages(whole, l.pipeline, recipe.strategy.mesh.stage_boundaries, recipe.file);
  const int64_t micro = recipe.step_batch() / l.micro_batches;  // a data rank's batch, cut
  // The slowest stage's work and messages; the schedule run op by op (plan_pipeline.hpp)
  // says what the bubble adds. A stage sends its output forward and receives its gradient
  // back for each micro-batch over the link between the two stages' hosts.
  const double scale_to_full_speed = 1.0 / cores.ranks_per_core;  // the turns are simulated
  std::vector<PipeStage> stages;
  StageTime slowest;
  StepEstimate e;
  double once_ms = 0;  // the longest of the stages' sums once a step (sequence parallelism's whole weights)
  StageWeights heaviest;
  for (int s = 0; s < plan.stages(); ++s) {
    const size_t first = plan.first[static_cast<size_t>(s)], end = plan.first[static_cast<size_t>(s) + 1];
    StageTime st = stage_time(whole, first, end, l, micro, links, times, cores.profile_scale(l));
    const StageWeights weights = stage_weights(whole, first, end);
    if (weights.elements > heaviest.elements) heaviest = weights;  // the rank with the most weights'
    const Sent once = sequence_shard_gradients(whole, first, end, l, links);
    if (s == 0) {  // rank 0's, as bench counts them
      e.rank0_tensor_bytes = (st.tensor_forward.bytes + st.tensor_backward.bytes) * l.micro_batches + once.bytes;
      e.rank0_tensor_collectives = (st.tensor_forward.collectives + st.tensor_backward.collectives) * l.micro_batches +
                                   once.collectives;
    }
    once_ms = std::max(once_ms, once.seconds * 1e3);
    if (s + 1 < plan.stages()) {
      const int crossing = stage_pairs_on_a_link(l, cluster, s);
      const double bytes = static_cast<double>(whole.layer_shapes()[end - 1].numel() * micro) * kFloatBytes;
      st.pipe_s = message_link(links, crossing > 0, std::max(1, crossing)).seconds(bytes);
    }
    stages.push_back(PipeStage{st.forward_s * scale_to_full_speed, st.backward_s * scale_to_full_speed,
                               st.tensor_forward.seconds, st.tensor_backward.seconds, st.pipe_s,
                               stage_ranks_on_hosts(l, cluster, s)});
    if (st.total() > slowest.total()) slowest = st;
  }
  const auto m = static_cast<double>(l.micro_batches);
  e.compute_ms = slowest.compute_s() * 1e3 * m;
  e.tensor_ms = slowest.tensor_s() * 1e3 * m;
  e.pipe_ms = std::max(0.0, slowest.pipe_s - slowest.compute_s() - slowest.tensor_s()) * 1e3 * m;  // beyond the work
  const std::vector<double> host_cores(static_cast<size_t>(cluster.hosts), cluster.per_host() * scale_to_full_speed);
  const double step_s = simulate_pipeline(stages, parse_pipe_schedule(recipe.strategy.mesh.schedule), l.micro_batches, host_cores);
  e.bubble_ms = std::max(0.0, step_s * 1e3 - e.compute_ms - e.tensor_ms - e.pipe_ms);
  e.tensor_ms += once_ms;
  const bool data_across = l.data > 1 && cluster.host_of(0) != cluster.host_of(l.tensor * (l.data - 1));
  const int sharing = data_groups_on_a_host(l, cluster);
  const bool sharded = l.shard_optimizer || l.zero_stage > 0, both = data_group_on_both_links(l, cluster);
  const auto values = static_cast<double>(rank_value_bytes);
  Sent sent;  // ZeRO's collectives, else the gradients' all-reduce
  if (sharded) {
    sent = zero_collectives(both ? shards_on_both_links(links, sharing) : shard_link(links, data_across, sharing), heaviest,
                            values, l);
  } else if (l.data > 1) {
    sent.add(TensorCollective::Kind::all_reduce, values,
             both ? ring_on_both_links(links, sharing) : link(links, data_across, sharing), l.data);
  }
  e.data_ms = sent.seconds * 1e3 + (waits_like_calibration(l, cluster, data_across) ? cores.data_wait_share * e.compute_ms : 0);
  e.data_bytes = sent.bytes;
  const double share = static_cast<double>(rank_value_bytes) / static_cast<double>(std::max<int64_t>(1, times.value_bytes));
  e.update_ms = times.update_ms * share / (sharded ? l.data : 1) * cores.profile_scale(l);
  e.other_ms = times.step_ms * cores.profile_scale(l);
  return e;
}

LayerTimes mean_of(const std::vector<LayerTimes>& rounds) {
  LayerTimes mean = rounds.front();
  const auto n = static_cast<double>(rounds.size());
  for (auto& [name, ms] : mean.layer_ms) {
    ms = {0, 0};
    for (const LayerTimes& r : rounds) ms.first += r.layer_ms.at(name).first / n, ms.second += r.layer_ms.at(name).second / n;
  }
  mean.update_ms = mean.step_ms = 0;
  for (const LayerTimes& r : rounds) mean.update_ms += r.update_ms / n, mean.step_ms += r.step_ms / n;
  return mean;
}

double slowdown_for_step(const Recipe& recipe, const PlanLayout& layout, const Cluster& cluster, const Links& links,
                         const LayerTimes& times, CoreSharing cores, double CoreSharing::*slowdown, double measured_ms) {
  const auto predicted_ms = [&](double value) {
    cores.*slowdown = value;
    return estimate_step(recipe, layout, cluster, links, times, times.value_bytes, cores).total_ms();
  };
  // No faster than alone: a step that beats the links' own price leaves compute as profiled.
  double low = 1, high = 2;
  if (predicted_ms(low) >= measured_ms) return low;
  while (predicted_ms(high) < measured_ms && high < 1e6) low = high, high *= 2;
  for (int i = 0; i < 40; ++i) {  // halving: a pipeline's simulated step is not linear in it
    const double mid = (low + high) / 2;
    (predicted_ms(mid) < measured_ms ? low : high) = mid;
  }
  return (low + high) / 2;
}

double data_wait_for_step(const Recipe& recipe, const PlanLayout& layout, const Cluster& cluster, const Links& links,
                          const LayerTimes& times, const CoreSharing& cores, double measured_ms) {
  CoreSharing without_wait = cores;
  without_wait.data_wait_share = 0;
  const StepEstimate e = estimate_step(recipe, layout, cluster, links, times, times.value_bytes, without_wait);
  return std::max(0.0, measured_ms - e.total_ms()) / std::max(1e-9, e.compute_ms);
}

}  // namespace distrain
