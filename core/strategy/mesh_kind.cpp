// The mesh's StrategyKind: its keys (the axes' degrees, the pipeline's micro-batches,
// schedule and stage boundaries, the optimizer's sharding and offload, sequence and
// vocabulary parallelism), one data replica per data rank, each rank on its own device.
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include "core/io/recipe.hpp"
#include "core/io/strategy_kind.hpp"
#include "core/strategy/mesh_strategy.hpp"

namespace distrain {

namespace {

// The degrees of the data, tensor and pipeline axes (their product must be the number of
// ranks launched: the strategy checks that before MPI starts).
void parse_degrees(ConfigTable& c, MeshSpec& m) {
  for (const auto& [key, degree] : {std::pair{"data", &m.data}, {"tensor", &m.tensor}, {"pipeline", &m.pipeline}}) {
    *degree = c.get_int(key, 1);
    if (*degree < 1 || *degree > 4096) c.fail(key, fmt::format("must be in [1, 4096], got {}", *degree));
  }
}

// What is sharded or split beyond the layers: the optimizer state over the data axis,
// sequences and the vocabulary over the tensor axis.
void parse_splits(ConfigTable& c, MeshSpec& m) {
  m.shard_optimizer = c.get_bool("shard_optimizer", false);
  if (m.shard_optimizer && m.data == 1)
    c.fail("shard_optimizer", "shards the optimizer state over the data axis, and data = 1 leaves nothing to shard over; "
           "set strategy.data > 1 or leave shard_optimizer out");
  m.sequence_parallel = c.get_bool("sequence_parallel", false);
  if (m.sequence_parallel && m.tensor == 1)
    c.fail("sequence_parallel", "shards sequences over the tensor axis, and tensor = 1 leaves nothing to shard over; set "
           "strategy.tensor > 1 or leave sequence_parallel out");
  if (c.has("vocab_parallel")) {
    m.vocab_parallel = c.get_bool("vocab_parallel", true);
    if (*m.vocab_parallel && m.tensor == 1)
      c.fail("vocab_parallel", "splits the vocabulary over the tensor axis, and tensor = 1 leaves nothing to split; set "
             "strategy.tensor > 1 or leave vocab_parallel out");
  }
  m.offload_optimizer = c.get_bool("offload_optimizer", false);
}

// The pipeline axis: micro-batches per step, the schedule and where stages begin.
void parse_pipeline(ConfigTable& c, MeshSpec& m, int64_t per_replica_batch) {
  m.micro_batches = c.get_int("micro_batches", 1);
  if (m.micro_batches < 1 || m.micro_batches > 4096) c.fail("micro_batches", fmt::format("must be in [1, 4096], got {}", m.micro_batches));
  if (m.micro_batches > per_replica_batch)
    c.fail("micro_batches", fmt::format("{} micro-batches of a per_replica_batch of {}: use at most {}", m.micro_batches,
                                        per_replica_batch, per_replica_batch));
  m.schedule = c.get_choice("schedule", "1f1b", {"gpipe", "1f1b"});
  m.stage_boundaries = c.get_string_list("stage_boundaries", {});
  if (!m.stage_boundaries.empty() && static_cast<int64_t>(m.stage_boundaries.size()) != m.pipeline - 1)
    c.fail("stage_boundaries", fmt::format("names {} layer(s); pipeline = {} needs {} (the first layer of each stage after the first)",
                                           m.stage_boundaries.size(), m.pipeline, m.pipeline - 1));
}

class MeshKind final : public StrategyKind {
 public:
  std::string name() const override { return "mesh"; }
  Processes processes() const override { return Processes::launched; }
  std::vector<std::string> own_keys() const override {
    return {"data", "tensor", "pipeline", "micro_batches", "schedule", "stage_boundaries", "shard_optimizer",
            "sequence_parallel", "vocab_parallel", "offload_optimizer"};
  }
  void parse(ConfigTable& c, StrategySpec& s, const std::vector<Device>& devices) const override {
    parse_degrees(c, s.mesh);
    parse_splits(c, s.mesh);
    parse_pipeline(c, s.mesh, s.per_replica_batch);
    // Several devices are a host's GPUs: its launcher-local rank r takes entry r mod their number.
    const bool gpus = std::all_of(devices.begin(), devices.end(), [](const Device& d) { return d.is_cuda(); });
    if (devices.size() != 1 && !gpus)
      c.fail("devices", fmt::format("mesh takes one device for every rank, or a host's GPUs (one per rank there), got [{}]",
                                    fmt::join(s.devices, ", ")));
  }
  void check_train(ConfigTable& c, const TrainSpec& t) const override {
    if (t.accumulate_steps > 1) c.fail("accumulate_steps", "the mesh splits its batch itself: use strategy.micro_batches");
  }
  std::string label(const StrategySpec& s) const override {
    return fmt::format("mesh: data {} x tensor {} x pipeline {} ({} ranks, each on {})", s.mesh.data, s.mesh.tensor,
                       s.mesh.pipeline, s.mesh.ranks(), mesh_devices(s));
  }
  // A tensor group shares its data rank's slice.
  int replicas(const StrategySpec& s, int) const override { return static_cast<int>(s.mesh.data); }
  std::vector<Device> devices_of_this_process(const Recipe& recipe) const override { return {mesh_rank_device(recipe)}; }
  bool offloads_masters(const Recipe& recipe) const override { return sharded_masters(recipe); }
  bool checked_per_rank() const override { return true; }
  std::unique_ptr<Strategy> make(const Recipe& recipe) const override { return make_mesh_strategy(recipe); }
  std::unique_ptr<Strategy> make_on(const Recipe& recipe, const Mesh& mesh) const override {
    return make_mesh_strategy(recipe, mesh);
  }
};
DT_REGISTER_STRATEGY(MeshKind, 6);

}  // namespace

}  // namespace distrain
